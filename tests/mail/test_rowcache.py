"""Row cache: a long-lived reader's ``with_artifacts()`` kept up to date from the index's changes."""

from __future__ import annotations

from pathlib import Path

from tools.corpus import generate
from workflow.mail.index import Index, reset
from workflow.mail.maildir import Maildirs
from workflow.mail.rowcache import ArtifactRows

DOMAIN = "workflow.local"


def setup(tmp_path: Path) -> tuple[Path, Maildirs, ArtifactRows]:
    root = tmp_path / "mail"
    generate(root, 60, mailboxes=("spec-writer", "spec-reviewer", "implementer"), artifacts=5)
    md = Maildirs(root)
    path = tmp_path / "index.sqlite"
    with Index(path, md, DOMAIN):
        pass  # built on first open
    return path, md, ArtifactRows(path, lambda: Index(path, md, DOMAIN))


def truth(path: Path, md: Maildirs) -> list[object]:
    with Index(path, md, DOMAIN) as index:
        index.refresh()
        return list(index.with_artifacts())


def test_the_rows_follow_added_read_and_removed_copies(tmp_path: Path) -> None:
    path, md, cache = setup(tmp_path)
    want = truth(path, md)
    assert cache.rows() == want and len(want) == 60
    version, first = cache.version, cache.rows()
    assert cache.rows() is first and cache.version == version  # unchanged: nothing read again

    box = md.root / "spec-reviewer"
    copy = next((box / "cur").iterdir())
    (box / "new" / "1.M1P1.copied").write_bytes(copy.read_bytes())  # another copy, a new row
    want = truth(path, md)  # the index takes the new copy in; the cache reads only it
    assert cache.rows() == want and len(want) == 61 and cache.version > version
    (box / "new" / "9999999999.M2P1.late").write_bytes(copy.read_bytes())
    want = truth(path, md)
    assert cache.rows() == want
    unread = next((box / "new").iterdir())
    unread.rename(box / "cur" / (unread.name + ":2,S"))  # read: the same row, renamed and flagged
    gone = next((md.root / "implementer" / "cur").iterdir())
    gone.unlink()
    want = truth(path, md)
    assert cache.rows() == want and cache.version > version
    assert len(want) == 61


def test_a_rebuilt_index_file_is_read_again(tmp_path: Path) -> None:
    path, md, cache = setup(tmp_path)
    assert cache.rows() == truth(path, md)
    (md.root / "spec-writer" / "cur" / "1.M9P9.extra").write_bytes(
        next((md.root / "spec-reviewer" / "cur").iterdir()).read_bytes()
    )
    reset(path, md, DOMAIN)  # `workflow reindex` after damage: a new file, ids and strings renumbered
    want = truth(path, md)
    assert cache.rows() == want and len(want) == 61
