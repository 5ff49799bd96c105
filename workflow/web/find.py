"""Find: the artifacts whose name or text has every word of a search — the other half of the
cockpit's search box (the mail half is ``pages.search``, over what ``Sight`` lets the viewer read).

An artifact's text is the team's: everyone logged in reads every file in the state folders (the
board shows them all). Each file is read below the project without following a link
(``beneath.read``), at most ``MAX_BYTES`` of it, and kept by its size and mtime until it changes.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

from workflow.core import beneath
from workflow.core.config import Config
from workflow.core.errors import ArtifactError
from workflow.core.locate import Artifact, scan

MAX_BYTES = 256 * 1024  # of one artifact's text searched
MAX_FOUND = 50  # artifacts a search shows at most
MAX_KEPT = 20_000  # artifacts' texts kept between searches
SNIPPET = 160  # characters of the line a word was found on


class Found(NamedTuple):
    path: str
    name: str
    state: str
    snippet: str  # the first line that has a word of the search ("" when only the name has them)


class _Kept(NamedTuple):
    stamp: tuple[int, int]
    text: str
    lower: str


_kept: dict[tuple[str, str], _Kept] = {}
_lock = threading.Lock()


def words(text: str) -> list[str]:
    return [w for w in text.lower().split() if w][:10]


def _text(config: Config, a: Artifact) -> _Kept | None:
    top = config.project_dir
    try:
        st = beneath.lstat(top, a.path)
        if st is None:
            return None
        stamp = (st.st_mtime_ns, st.st_size)
        key = (str(top), a.path)
        with _lock:
            kept = _kept.get(key)
        if kept is not None and kept.stamp == stamp:
            return kept
        data, _ = beneath.read(top, a.path, MAX_BYTES)
    except (ArtifactError, OSError):
        return None
    text = data.decode("utf-8", "replace")
    kept = _Kept(stamp, text, text.lower())
    with _lock:
        if len(_kept) >= MAX_KEPT:  # files renamed and removed over a long run: start again
            _kept.clear()
        _kept[key] = kept
    return kept


def artifacts(config: Config, text: str) -> tuple[Found, ...]:
    """The artifacts whose path or text has every word of ``text`` (any case), in path order."""
    ws = words(text[:200])
    if not ws:
        return ()
    out = []
    for a in scan(config):
        path = a.path.lower()
        kept = None
        if not all(w in path for w in ws):
            kept = _text(config, a)
            if kept is None or not all(w in path or w in kept.lower for w in ws):
                continue
        out.append(Found(a.path, a.name, a.state, _snippet(kept, ws)))
        if len(out) >= MAX_FOUND:
            break
    return tuple(out)


def _snippet(kept: _Kept | None, ws: list[str]) -> str:
    if kept is None:
        return ""
    for line in kept.text.splitlines():
        low = line.lower()
        if any(w in low for w in ws):
            line = line.strip()
            return line if len(line) <= SNIPPET else line[: SNIPPET - 1] + "…"
    return ""


def forget() -> None:
    """Drop what was kept (a test's or a long server's fresh start)."""
    with _lock:
        _kept.clear()
