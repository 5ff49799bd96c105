// Live pages: the server sends a page's main part again when what it shows changes (/events).
// While you type in a form of the page, an update waits until you leave it.
(function () {
  "use strict";
  var main = document.getElementById("main");
  var dot = document.getElementById("live");
  if (!main || !main.dataset.stream || !window.EventSource) { return; }
  var pending = null;
  function busy() {
    var a = document.activeElement;
    return a && main.contains(a) && (a.tagName === "TEXTAREA" || a.tagName === "INPUT") && a.value;
  }
  function put(html) {
    if (busy()) { pending = html; return; }
    pending = null;
    main.innerHTML = html;
    document.body.dataset.updated = String(Date.now());
  }
  document.addEventListener("focusout", function () {
    if (pending !== null) { setTimeout(function () { if (pending !== null) { put(pending); } }, 0); }
  });
  var source = new EventSource(main.dataset.stream);
  source.addEventListener("open", function () { if (dot) { dot.className = "live on"; } });
  source.addEventListener("error", function () { if (dot) { dot.className = "live"; } });
  source.addEventListener("main", function (e) { put(JSON.parse(e.data)); });
  source.addEventListener("gone", function () { source.close(); window.location.reload(); });
})();
