"""Threading (JWZ/RFC 5256 without subject merging): order, gaps, cycles, duplicates, notmuch parity."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from tools.corpus import generate
from workflow.mail.index import Index
from workflow.mail.maildir import Maildirs
from workflow.mail.threads import Threads


def test_reply_before_parent_gives_the_same_tree() -> None:
    links = [("<a@x>", None, ""), ("<b@x>", "<a@x>", "<a@x>"), ("<c@x>", "<b@x>", "<a@x> <b@x>")]
    for order in (links, list(reversed(links))):
        t = Threads(order)
        assert t.count() == 1
        assert t.members("<c@x>") == ["<a@x>", "<b@x>", "<c@x>"]


def test_missing_parent_joins_its_children() -> None:
    t = Threads([("<b@x>", "<a@x>", "<a@x>"), ("<c@x>", "<a@x>", "<a@x>"), ("<z@x>", None, "")])
    assert t.count() == 2
    assert sorted(t.members("<b@x>")) == ["<b@x>", "<c@x>"]


def test_references_cycles_terminate() -> None:
    t = Threads([("<a@x>", "<b@x>", "<b@x>"), ("<b@x>", "<a@x>", "<a@x>"), ("<c@x>", "<c@x>", "<c@x>")])
    assert t.count() == 2
    assert sorted(t.members("<a@x>")) == ["<a@x>", "<b@x>"]


def test_duplicate_message_ids_count_once() -> None:
    t = Threads([("<a@x>", None, ""), ("<a@x>", "<q@x>", "<q@x>"), ("<b@x>", "<a@x>", "<a@x>")])
    assert t.count() == 1
    assert t.members("<b@x>") == ["<a@x>", "<b@x>"]


def test_random_orders_agree() -> None:
    rng = random.Random(7)
    links = []
    for i in range(300):
        parent = f"<{rng.randrange(i)}@x>" if i and rng.random() < 0.7 else None
        refs = parent or ""
        links.append((f"<{i}@x>", parent, refs))
    counts = set()
    for _ in range(5):
        rng.shuffle(links)
        counts.add(Threads(links).count())
    assert len(counts) == 1


@pytest.mark.skipif(
    shutil.which("notmuch") is None, reason="notmuch not installed (scripts/system-packages installs it)"
)
def test_thread_count_equals_notmuch(tmp_path: Path) -> None:
    root = tmp_path / "mail"
    generate(root, 1500, seed=3, missing_parent_share=0.2, mailboxes=("a", "b", "c", "d"))
    with Index(tmp_path / "ix.sqlite", Maildirs(root), "workflow.local") as ix:
        ours = Threads(ix.thread_links()).count()
    cfg = tmp_path / "notmuch-config"
    cfg.write_text(f"[database]\npath={root}\n[new]\ntags=unread\n")
    env = {**os.environ, "NOTMUCH_CONFIG": str(cfg)}
    subprocess.run(["notmuch", "new", "--quiet"], env=env, check=True, capture_output=True)
    theirs = int(
        subprocess.run(
            ["notmuch", "count", "--output=threads", "*"], env=env, capture_output=True, text=True, check=True
        ).stdout
    )
    assert ours == theirs
    assert ours > 100
