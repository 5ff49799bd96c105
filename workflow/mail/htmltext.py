"""HTML text: an HTML mail body as the readable text a person or an agent is shown.

What an HTML composer sends, read the way a text mail client renders it: paragraphs and line
breaks kept, list items as ``- item`` (``1. item`` in an ordered list), links as ``text (url)``,
images as ``[image: alt]``, entities decoded, and nothing of ``<script>``, ``<style>``, ``<head>``
or ``<template>``. Built on the standard library's ``html.parser`` (a tolerant tokenizer that
never raises on malformed markup) rather than a PyPI converter: the rules above are all we need,
they fit in this module, and a body read by every mail command should not pull in a dependency.
Bounded: at most ``MAX_HTML`` characters of markup are read (a note says how much was left out).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

MAX_HTML = 500_000  # characters of markup converted; the rest is named, not read
HIDDEN = frozenset({"script", "style", "head", "template", "noscript", "title"})
BLOCKS = frozenset(
    {
        "p", "div", "section", "article", "header", "footer", "main", "aside", "nav", "blockquote",
        "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "dl", "dt", "dd", "table", "tr", "form",
        "fieldset", "address", "figure", "figcaption", "hr", "pre", "center",
    }
)  # fmt: skip
LINK_SCHEMES = ("http://", "https://", "mailto:", "ftp://")
SPACE_RE = re.compile(r"[ \t\r\n\f\v]+")


class _Text(HTMLParser):
    """Collects the readable text of a document, one rendering rule per tag."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.hidden = 0  # depth inside script/style/head…
        self.pre = 0
        self.lists: list[int] = []  # per open list: 0 for <ul>, else the next number of an <ol>
        self.links: list[tuple[str, int]] = []  # (href, len(out) at <a>) of the open links

    def _break(self, n: int = 1) -> None:
        """End the current line (n=2: leave a blank line), never piling breaks up."""
        text = "".join(self.out[-4:])
        have = len(text) - len(text.rstrip("\n")) if text.strip(" ") else 2
        if have < n:
            self.out.append("\n" * (n - have))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in HIDDEN:
            self.hidden += 1
        elif self.hidden:
            return
        elif tag == "br":
            self.out.append("\n")
        elif tag == "li":
            self._break()
            indent = "  " * max(len(self.lists) - 1, 0)
            if self.lists and self.lists[-1]:
                self.out.append(f"{indent}{self.lists[-1]}. ")
                self.lists[-1] += 1
            else:
                self.out.append(f"{indent}- ")
        elif tag in ("td", "th"):
            if self.out and not self.out[-1].endswith(("\n", " ")):
                self.out.append(" ")
        elif tag == "a":
            self.links.append((dict(attrs).get("href") or "", len(self.out)))
        elif tag == "img":
            alt = (dict(attrs).get("alt") or "").strip()
            if alt:
                self.out.append(f"[image: {SPACE_RE.sub(' ', alt)}]")
        elif tag in BLOCKS:
            self._break(1 if tag in ("tr", "dt", "dd") else 2)
            if tag in ("ul", "ol"):
                self.lists.append(0 if tag == "ul" else 1)
            elif tag == "pre":
                self.pre += 1
            elif tag == "hr":
                self.out.append("-" * 20)
                self._break(2)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in HIDDEN:  # <script/> opens nothing
            self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag in HIDDEN:
            self.hidden = max(self.hidden - 1, 0)
        elif self.hidden:
            return
        elif tag == "a" and self.links:
            href, start = self.links.pop()
            shown = SPACE_RE.sub(" ", "".join(self.out[start:])).strip()
            href = href.strip()
            if href.lower().startswith(LINK_SCHEMES) and href not in (shown, "mailto:" + shown):
                self.out.append(f" ({href})" if shown else href)
        elif tag in BLOCKS or tag == "li":
            if tag in ("ul", "ol") and self.lists:
                self.lists.pop()
            elif tag == "pre":
                self.pre = max(self.pre - 1, 0)
            self._break(1 if tag in ("li", "tr", "dt", "dd") else 2)

    def handle_data(self, data: str) -> None:
        if self.hidden:
            return
        if self.pre:
            self.out.append(data)
            return
        text = SPACE_RE.sub(" ", data)
        if text == " " and (not self.out or self.out[-1].endswith((" ", "\n"))):
            return
        if self.out and self.out[-1].endswith(("\n", " ")):
            text = text.lstrip(" ")
        self.out.append(text)


def html_text(markup: str) -> str:
    """The readable text of an HTML document (LF line ends, at most one blank line in a row)."""
    more = len(markup) - MAX_HTML
    parser = _Text()
    parser.feed(markup[:MAX_HTML] if more > 0 else markup)
    parser.close()
    lines = [line.rstrip() for line in "".join(parser.out).split("\n")]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip("\n")
    if more > 0:
        text += f"\n\n[… {more} more characters of HTML not shown]"
    return text + "\n" if text else ""
