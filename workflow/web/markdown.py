"""Markdown: an artifact's text as safe HTML for the cockpit's thread page.

markdown-it-py's CommonMark with raw HTML off (a ``<script>`` in the text is shown as text),
images off (no page fetches a URL an artifact chose), and links kept only when they are
relative or ``http``, ``https`` or ``mailto`` (``javascript:``, ``data:``, ``vbscript:``,
``file:``… become text). Everything else markdown-it escapes; the page's Content-Security-Policy
is a second wall, not the first.
"""

from __future__ import annotations

import re
from functools import cache

from markdown_it import MarkdownIt

SAFE_LINK = re.compile(r"^(?:https?:|mailto:|[^:/?#]*(?:[/?#]|$))", re.IGNORECASE)


def safe_link(url: str) -> bool:
    """Whether a link may stay a link: relative, or http, https or mailto (control characters
    and spaces a browser ignores are dropped before the scheme is judged)."""
    plain = re.sub(r"[\x00-\x20\x7f]", "", url)
    return SAFE_LINK.match(plain) is not None


@cache
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.disable("image")
    md.validateLink = safe_link  # type: ignore[method-assign]
    return md


def render(text: str) -> str:
    """``text`` (Markdown) as HTML that carries no markup of the text's own."""
    return str(_parser().render(text))
