"""Index: a cache of the Maildirs — rebuilt identically, self-healing, never the truth."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers.project import Project
from workflow.core.errors import MailIndexError
from workflow.mail.inbox import group, select, thread_rows
from workflow.mail.maildir import Maildirs
from workflow.mail.message import parse


def scenario(p: Project) -> dict[str, str]:
    ids = {}
    ids["rr"] = p.send(
        "spec-writer", "review-request", "specs/proposed/user-auth.md", "spec-reviewer", CONTEXT="Focus on errors"
    )
    ids["cl"] = p.send(
        "spec-reviewer",
        "clarification-request",
        "specs/proposed/user-auth.md",
        "spec-writer",
        ids["rr"],
        QUESTION="Refresh tokens?",
    )
    ids["an"] = p.send(
        "spec-writer", "answer", "specs/proposed/user-auth.md", "spec-reviewer", ids["cl"], CONTEXT="Use refresh tokens"
    )
    ids["bl"] = p.send(
        "implementer", "blocker-report", "specs/doing/billing.md", "spec-reviewer", BLOCKING_DETAILS="API mismatch"
    )
    ids["in"] = p.send(
        "spec-reviewer-panel.claude",
        "question",
        "specs/*/user-auth.md",
        "spec-reviewer-panel-internal",
        QUESTION="secret quokka",
    )
    return ids


def snapshot(p: Project, ids: dict[str, str]) -> object:
    def strip(rows: list) -> list:  # type: ignore[type-arg]
        return [
            (
                r.mailbox,
                r.key,
                r.subdir,
                r.flags,
                r.message_id,
                r.in_reply_to,
                r.refs,
                r.sender,
                r.recipients,
                r.subject,
                r.date,
                r.event,
                r.state,
                r.artifacts,
                r.space,
            )
            for r in rows
        ]

    with p.app.index() as ix:
        ix.refresh()
        return (
            strip(ix.query()),
            strip(select(ix, ["spec-reviewer"], artifact="specs/*/user-auth.md")),
            [[m.message_id for m in t.messages] for t in group(select(ix, ["spec-reviewer"]))],
            strip(ix.search("refresh tokens")),
            strip(thread_rows(ix, ["spec-writer"], ids["rr"], ["spec-writer@workflow.local"])),
        )


def test_reindex_gives_identical_results_and_deleting_loses_nothing(project: Project) -> None:
    ids = scenario(project)
    md = Maildirs(project.mail)
    [e] = [x for x in md.scan("spec-reviewer") if parse(x.path.read_bytes()).message_id == ids["rr"]]
    md.set_flags(e, "S")
    before = snapshot(project, ids)
    with project.app.index() as ix:
        assert ix.rebuild() == ix.count()
    assert snapshot(project, ids) == before
    project.app.config.index_path.unlink()
    assert snapshot(project, ids) == before


def test_refresh_sees_changes_made_by_other_mail_clients(project: Project) -> None:
    ids = scenario(project)
    with project.app.index() as ix:
        assert {r.message_id for r in select(ix, ["spec-reviewer"])} == {ids["rr"], ids["an"], ids["bl"]}
    box = project.mail / "spec-reviewer"
    # A client reads the blocker (new/ → cur/ with S) and deletes the answer.
    for f in (box / "new").iterdir():
        mid = parse(f.read_bytes()).message_id
        if mid == ids["bl"]:
            os.rename(f, box / "cur" / (f.name + ":2,S"))
        elif mid == ids["an"]:
            f.unlink()
    import mailbox

    mailbox.Maildir(box, create=False).add(
        b"From: user@workflow.local\nSubject: hand-made\nMessage-ID: <hand@x>\n\nhi\n"
    )
    with project.app.index() as ix:
        assert ix.refresh(["spec-reviewer"]) == 1
        assert {r.message_id for r in select(ix, ["spec-reviewer"])} == {ids["rr"], "<hand@x>"}
        assert ix.refresh(["spec-reviewer"]) == 0  # nothing changed since


def test_search_shows_only_what_the_role_may_see(project: Project) -> None:
    scenario(project)
    ros = project.app.roster
    with project.app.index() as ix:
        assert len(ix.search("quokka")) == 3
        boxes, sent = ros.view("spec-writer")
        assert ix.search("quokka", boxes, senders=sent) == []
        boxes, sent = ros.view("spec-reviewer-panel.gpt-5")
        assert [r.mailbox for r in ix.search("quokka", boxes, senders=sent)] == ["spec-reviewer-panel.gpt-5"]
        assert ix.search("refresh", *ros.view("spec-writer")[:1]) != []
    with pytest.raises(MailIndexError, match="no words"):
        with project.app.index() as ix:
            ix.search("!!!")


def test_corrupt_index_is_a_clear_error_and_reindex_repairs_it(project: Project) -> None:
    scenario(project)
    path = project.app.config.index_path
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(MailIndexError, match="unreadable.*workflow reindex"):
        project.app.index()
    r = project.run("inbox", "spec-reviewer")
    assert r.returncode != 0 and "workflow reindex" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = project.run("reindex")
    assert r.returncode == 0, r.stderr
    assert "indexed 7 messages" in r.stdout
    assert project.run("inbox", "spec-reviewer").returncode == 0


def test_a_late_server_batch_never_overwrites_a_fresher_row(tmp_path: Path) -> None:
    """The server indexes in batches after its 250; a reader may have rescanned the mailbox and a
    role marked the copy seen before that batch lands. The batch must not bring back 'unread'."""
    from workflow.mail.index import Index
    from workflow.mail.maildir import Maildirs
    from workflow.mail.message import parse

    md = Maildirs(tmp_path / "mail")
    raw = b"From: a@workflow.local\r\nTo: b@workflow.local\r\nMessage-ID: <late@x>\r\nSubject: s\r\n\r\nbody\r\n"
    (entry,) = md.deliver(["spec-reviewer"], raw)
    with Index(tmp_path / "idx.sqlite", md, "workflow.local") as index:
        index.refresh()
        md.set_flags(entry, "S")
        index.refresh()
        assert [r.seen for r in index.query(["spec-reviewer"])] == [True]
        index.add_many([([entry], raw, parse(raw))])  # the server's batch, made before the mark
        rows = index.query(["spec-reviewer"])
        assert [(r.seen, r.subdir) for r in rows] == [(True, "cur")]
        assert [r.message_id for r in index.search("body")] == ["<late@x>"]


def test_a_transcript_reads_each_copy_where_the_index_put_it_or_wherever_it_went(project: Project) -> None:
    from workflow.mail.inbox import read_row

    mid = project.send("user", "review-request", "specs/proposed/user-auth.md", "spec-reviewer", CONTEXT="where")
    with project.app.index() as index:
        index.refresh()
        (row,) = index.query(["spec-reviewer"], message_ids=[mid])
    raw = read_row(project.mail, row)
    assert raw is not None and b"where" in raw
    (new,) = (project.mail / "spec-reviewer" / "new").iterdir()
    new.rename(project.mail / "spec-reviewer" / "cur" / f"{new.name}:2,RS")  # read in a mail client since
    assert read_row(project.mail, row) == raw
    (project.mail / "spec-reviewer" / "cur" / f"{new.name}:2,RS").unlink()
    assert read_row(project.mail, row) is None


def _three_copies(md: Maildirs) -> list[tuple[list, bytes, object]]:  # type: ignore[type-arg]
    """Three copies stored after the index was opened (a fresh index indexes what it finds)."""
    items = []
    for word in ("wombat", "quokka", "numbat"):
        raw = (
            f"From: a@workflow.local\r\nTo: b@workflow.local\r\nMessage-ID: <{word}@x>\r\nSubject: about a {word}\r\n"
            f"\r\nthe {word} body\r\n"
        ).encode()
        items.append((md.deliver(["spec-reviewer"], raw), raw, parse(raw)))
    return items


def test_full_text_rows_left_for_later_are_written_before_a_search(tmp_path: Path) -> None:
    """The server indexes a copy at once but leaves its full-text row for a quiet moment; a search
    must still find it, wherever the copy went since, and a copy that is gone settles its note."""
    from workflow.mail.index import Index

    md = Maildirs(tmp_path / "mail")
    with Index(tmp_path / "idx.sqlite", md, "workflow.local") as index:
        items = _three_copies(md)
        index.add_many(items, text=False)  # type: ignore[arg-type]
        assert index.text_due() == 3
        index.add_many(items[1:], text=False)  # type: ignore[arg-type]  # a batch again: rows kept, no new notes
        assert index.text_due() == 3 and index.count() == 3
        md.set_flags(items[1][0][0], "S")  # read in a mail client: now in cur/ with a flag
        os.unlink(items[2][0][0].file)  # deleted before its text was written
        assert [r.message_id for r in index.search("wombat")] == ["<wombat@x>"]
        assert index.text_due() == 0
        assert [r.message_id for r in index.search("quokka")] == ["<quokka@x>"]
        assert index.search("numbat") == []
        assert index.fill_text() == 0


def test_full_text_rows_are_written_in_steps_oldest_first(tmp_path: Path) -> None:
    from workflow.mail.index import Index

    md = Maildirs(tmp_path / "mail")
    with Index(tmp_path / "idx.sqlite", md, "workflow.local") as index:
        items = _three_copies(md)
        index.add_many(items, text=False)  # type: ignore[arg-type]
        assert index.fill_text(2) == 2 and index.text_due() == 1
        # the two oldest have their rows (a plain FTS query: the search itself would fill the rest)
        found = {n for (n,) in index.db.execute("SELECT rowid FROM fts WHERE fts MATCH 'wombat OR quokka OR numbat'")}
        assert len(found) == 2 and max(found) < max(n for (n,) in index.db.execute("SELECT id FROM msg"))
        index.rebuild()
        assert index.text_due() == 0 and [r.message_id for r in index.search("numbat")] == ["<numbat@x>"]


def test_an_index_of_the_previous_schema_is_upgraded_in_place(tmp_path: Path) -> None:
    from workflow.mail.index import Index
    from workflow.mail.reader import SCHEMA_VERSION, Reader

    md = Maildirs(tmp_path / "mail")
    path = tmp_path / "idx.sqlite"
    with Index(path, md, "workflow.local") as index:
        items = _three_copies(md)
        index.add_many(items[:1])  # type: ignore[arg-type]
        index.db.executescript("DROP TABLE fts_todo; PRAGMA user_version=2;")  # as schema 2 left it
    assert Reader.open(str(path)) is None  # the reading fast path leaves an old index to the full command
    with Index(path, md, "workflow.local") as index:
        assert index.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        index.add_many(items[1:], text=False)  # type: ignore[arg-type]
        assert index.text_due() == 3  # the two new copies, and the old one (schema 4 rewrites every full text)
        assert {r.message_id for r in index.search("body")} == {"<wombat@x>", "<quokka@x>", "<numbat@x>"}


def test_a_schema_3_index_gains_html_bodies_and_display_names_in_its_full_text(tmp_path: Path) -> None:
    """Schema 3 indexed an HTML-only body as empty and no display names; the upgrade writes every
    copy's full text again, so an old index finds them too."""
    from workflow.mail.index import Index

    md = Maildirs(tmp_path / "mail")
    path = tmp_path / "idx.sqlite"
    raw = (
        b'From: "Bob Example" <spec-writer@workflow.local>\r\nTo: spec-reviewer@workflow.local\r\n'
        b"Message-ID: <html@x>\r\nSubject: a question\r\nContent-Type: text/html\r\n\r\n<p>Does the wallaby expire?</p>\r\n"
    )
    with Index(path, md, "workflow.local") as index:
        index.add_many([(md.deliver(["spec-reviewer"], raw), raw, parse(raw))])
        index.db.executescript(  # the full text as schema 3 wrote it
            "DROP TABLE fts; CREATE VIRTUAL TABLE fts USING fts5(subject, body, content='', detail=none); "
            "INSERT INTO fts(rowid, subject, body) SELECT id, 'a question', '' FROM msg; PRAGMA user_version=3;"
        )
    with Index(path, md, "workflow.local") as index:
        for words in ("wallaby", "Bob", "Bob Example", "spec writer"):
            assert [r.message_id for r in index.search(words)] == ["<html@x>"], words
