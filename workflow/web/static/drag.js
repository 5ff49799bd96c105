// Drag and drop on the board: a card dropped on another state's column posts the card's own
// "move to" form (the one that works without script) with that state; the server checks the move
// as `workflow move` does and says what happened — a refused move leaves the card where it is.
// Listeners sit on the document, so a board the live stream replaces keeps them.
(function () {
  "use strict";
  var TYPE = "text/x-workflow-card";
  var dragged = null;
  function card(el) { return el && el.closest ? el.closest(".card") : null; }
  function column(el) { return el && el.closest ? el.closest(".column[data-state]") : null; }
  function form(c) { return c ? c.querySelector("form.move") : null; }
  function mark() {  // a card with a "move to" form can be dragged (again after each live update)
    document.querySelectorAll(".card").forEach(function (c) { if (form(c)) { c.draggable = true; } });
  }
  mark();
  var main = document.getElementById("main");
  if (main && window.MutationObserver) { new MutationObserver(mark).observe(main, {childList: true}); }
  document.addEventListener("dragstart", function (e) {
    var c = card(e.target);
    if (!c || !form(c)) { return; }
    dragged = c.dataset.path;
    e.dataTransfer.setData(TYPE, dragged);
    e.dataTransfer.effectAllowed = "move";
    c.classList.add("dragging");
  });
  document.addEventListener("dragend", function (e) {
    var c = card(e.target);
    if (c) { c.classList.remove("dragging"); }
    dragged = null;
  });
  document.addEventListener("dragover", function (e) {
    var col = column(e.target);
    if (!col || !(dragged || (e.dataTransfer && Array.prototype.indexOf.call(e.dataTransfer.types, TYPE) >= 0))) { return; }
    e.preventDefault();
    e.dataTransfer.dropEffect = "move";
    col.classList.add("over");
  });
  document.addEventListener("dragleave", function (e) {
    var col = column(e.target);
    if (col && !col.contains(e.relatedTarget)) { col.classList.remove("over"); }
  });
  document.addEventListener("drop", function (e) {
    var col = column(e.target);
    if (!col) { return; }
    e.preventDefault();
    col.classList.remove("over");
    var path = (e.dataTransfer && e.dataTransfer.getData(TYPE)) || dragged;
    var f = null;
    document.querySelectorAll("form.move").forEach(function (x) { if (x.elements.path.value === path) { f = x; } });
    var from = f ? column(f) : null;
    if (!f || (from && from.dataset.state === col.dataset.state)) { return; }
    var state = col.dataset.state;
    var select = f.elements.state;
    var known = Array.prototype.some.call(select.options, function (o) { return o.value === state; });
    if (!known) { select.add(new Option(state + "/", state)); }  // not a legal target: the server says why
    select.value = state;
    f.submit();
  });
})();
