"""The artifact travels with the request (issue 48, item 2): its text inline, its head and a note
when large, a note when not text, and a diff against the last reviewed version, inline and as a
text/x-diff attachment; an agent's readers drop the copies. And workflow-notify refuses an
artifact that is not there (item 8), with "did you mean"."""

from __future__ import annotations

import email
import email.policy
from email.message import EmailMessage
from pathlib import Path

import pytest

from helpers.git import git_project, sh
from helpers.project import Project
from workflow.agents import context
from workflow.core.errors import MessageError
from workflow.delivery.notify import NotifyRequest, request
from workflow.mail.artparts import INLINE_LIMIT, copies
from workflow.mail.body import our_copies, part_text, readable
from workflow.mail.inbox import read_row

SPEC = "specs/proposed/user-auth.md"


@pytest.fixture
def repo(tmp_path: Path) -> Project:
    return git_project(tmp_path / "proj")


def mime(raw: bytes) -> EmailMessage:
    msg = email.message_from_bytes(raw, policy=email.policy.default)
    assert isinstance(msg, EmailMessage)
    return msg


def leaves(raw: bytes) -> list[EmailMessage]:
    return [p for p in mime(raw).walk() if not p.is_multipart()]  # type: ignore[misc]


def stored(p: Project, mid: str, box: str = "spec-reviewer") -> bytes:
    with p.app.index() as index:
        index.refresh()
        rows = [r for r in index.query([box]) if r.message_id == mid]
    assert rows, f"{mid} not in {box}"
    raw = read_row(p.app.config.mail_root, rows[0])
    assert raw is not None
    return raw


def test_review_request_carries_the_text_inline_and_then_the_diff(repo: Project) -> None:
    spec = repo.dir / SPEC
    spec.write_text("# User auth\n\nTokens expire after 1 hour.\n")
    first = stored(repo, repo.send("spec-writer", "review-request", SPEC, "spec-reviewer"))
    parts = leaves(first)
    assert [p.get_content_type() for p in parts] == ["text/plain", "text/plain"]
    assert parts[1]["X-Workflow-Copy"] == "artifact" and parts[1].get_content_disposition() == "inline"
    assert parts[1].get_content() == "# User auth\n\nTokens expire after 1 hour.\n"
    assert mime(first)["X-Artifact-Version"].endswith(" " + SPEC)
    sh(repo, "git", "commit", "-qam", "spec-writer: tokens")  # or not: the blob was written at sending

    spec.write_text("# User auth\n\nTokens expire after 15 minutes.\nRefresh tokens last a week.\n")
    second = stored(repo, repo.send("spec-writer", "review-request", SPEC, "spec-reviewer"))
    kinds = [(p.get_content_type(), p.get_content_disposition(), p["X-Workflow-Copy"]) for p in leaves(second)]
    assert kinds == [
        ("text/plain", "inline", None),
        ("text/plain", "inline", "artifact"),
        ("text/plain", "inline", "diff"),
        ("text/x-diff", "attachment", "diff"),
    ]
    diff = leaves(second)[3]
    assert diff.get_filename() == "user-auth.md.diff"
    text = diff.get_content()
    assert "-Tokens expire after 1 hour.\n" in text and "+Tokens expire after 15 minutes.\n" in text
    assert text.startswith(f"--- a/{SPEC} (last reviewed, blob ")
    assert leaves(second)[2].get_content() == text

    # an approval of the version reviewed carries its text and no diff (nothing changed since)
    approval = stored(repo, repo.send("spec-reviewer", "approval", SPEC, "spec-writer"), "spec-writer")
    assert [p["X-Workflow-Copy"] for p in leaves(approval)] == [None, "artifact"]


def test_uncommitted_revision_still_diffs(repo: Project) -> None:
    """The version sent is written to git's objects: a revision never committed is diffed too."""
    spec = repo.dir / SPEC
    spec.write_text("one\ntwo\n")
    repo.send("spec-writer", "review-request", SPEC, "spec-reviewer")
    spec.write_text("one\nthree\n")
    raw = stored(repo, repo.send("spec-writer", "review-request", SPEC, "spec-reviewer"))
    diffs = [c for c in copies(raw) if c.mark == "diff"]
    assert len(diffs) == 2 and "-two\n+three\n" in diffs[0].text


def test_a_large_artifact_carries_its_head_and_a_note(repo: Project) -> None:
    line = "A line of the specification, long enough to count.\n"
    (repo.dir / SPEC).write_text(line * (INLINE_LIMIT // len(line) + 500))
    raw = repo.app.compose(NotifyRequest("review-request", (SPEC,), ("spec-reviewer",), "spec-writer")).raw
    (art,) = [c for c in copies(raw) if c.mark == "artifact"]
    assert art.text.startswith(line) and len(art.text.encode()) < INLINE_LIMIT
    assert "only the first 200 lines" in art.text and "read the rest in the repository" in art.text
    exact = repo.dir / "specs/proposed/exact.md"
    exact.write_text("x" * (INLINE_LIMIT - 1) + "\n")  # at the limit: whole
    raw = repo.app.compose(
        NotifyRequest("review-request", (str(exact.relative_to(repo.dir)),), ("spec-reviewer",), "spec-writer")
    ).raw
    (whole,) = [c for c in copies(raw) if c.mark == "artifact"]
    assert whole.text == exact.read_text()


def test_a_binary_artifact_is_named_not_copied(repo: Project) -> None:
    (repo.dir / "specs/proposed/diagram.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(range(256)))
    raw = repo.app.compose(
        NotifyRequest("review-request", ("specs/proposed/diagram.png",), ("spec-reviewer",), "spec-writer")
    ).raw
    (art,) = copies(raw)
    assert "is not text" in art.text and "PNG" not in art.text and "IHDR" not in art.text


def test_a_symlinked_artifact_is_not_followed(repo: Project, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the owner's secret\n")
    (repo.dir / "specs/proposed/link.md").symlink_to(secret)
    raw = repo.app.compose(
        NotifyRequest("review-request", ("specs/proposed/link.md",), ("spec-reviewer",), "spec-writer")
    ).raw
    raw2 = repo.app.compose(
        NotifyRequest("review-request", ("specs/proposed/user-auth.md",), ("spec-reviewer",), "spec-writer")
    ).raw
    assert b"the owner's secret" not in raw + raw2


def test_an_agent_context_holds_no_copy(repo: Project) -> None:
    (repo.dir / SPEC).write_text("# User auth\n\nTREE-TEXT-ONE\n")
    repo.send("spec-writer", "review-request", SPEC, "spec-reviewer")
    (repo.dir / SPEC).write_text("# User auth\n\nTREE-TEXT-TWO\n")
    mid = repo.send("spec-writer", "review-request", SPEC, "spec-reviewer")
    raw = stored(repo, mid)
    assert b"TREE-TEXT-ONE" in raw and b"TREE-TEXT-TWO" in raw  # the copy and the diff are in the mail
    (repo.dir / SPEC).write_text("# User auth\n\nTREE-TEXT-THREE\n")  # the tree moved on: the agent reads it
    role = repo.app.roster.roles["spec-reviewer"]
    with repo.app.index() as index:
        index.refresh()
        new = [r for r in index.query(["spec-reviewer"]) if r.message_id == mid]
        ctx = context.build(repo.app, role, index, new)
    assert "TREE-TEXT-THREE" in ctx.prompt
    assert "TREE-TEXT-ONE" not in ctx.prompt and "TREE-TEXT-TWO" not in ctx.prompt
    assert "user-auth.md.diff" not in ctx.prompt and "Attachments" not in ctx.prompt
    assert readable(raw).parts == ()  # an agent's read tools list no copy, and read none by number
    with pytest.raises(MessageError, match="no attachment 1"):
        part_text(raw, 1)
    assert [p.content_type for p in readable(raw, copies=True).parts] == ["text/plain", "text/plain", "text/x-diff"]


def test_other_events_carry_no_copy(repo: Project) -> None:
    raw = repo.app.compose(
        NotifyRequest("question", (SPEC,), ("spec-reviewer",), "spec-writer", variables={"QUESTION": "?"})
    ).raw
    assert copies(raw) == [] and b"multipart" not in raw


def test_notify_refuses_a_missing_artifact_with_did_you_mean(repo: Project) -> None:
    (repo.dir / "specs/proposed/search.md").write_text("# Search\n")
    req = request("review-request", "specs/proposed/serch.md", "spec-reviewer", "spec-writer", None, [])
    with pytest.raises(MessageError, match=r"specs/proposed/serch.md does not exist.*did you mean search\?"):
        repo.app.compose(req)
    # a question may name one not yet written: that is how someone asks for it
    ask = request(
        "question", "specs/proposed/csv-export.md", "spec-writer", "spec-reviewer", None, ["QUESTION=write it?"]
    )
    assert repo.app.compose(ask).message_id
    # the command says it once and exits non-zero, sending nothing
    before = len(repo.new_files())
    r = repo.run("review-request", "specs/proposed/serch.md", "spec-reviewer", tool="workflow-notify")
    assert r.returncode != 0 and r.stderr.count("did you mean search?") == 1, r.stderr
    assert len(repo.new_files()) == before


def test_move_says_did_you_mean_for_a_path_too(repo: Project) -> None:
    (repo.dir / "specs/proposed/search.md").write_text("# Search\n")
    r = repo.run("move", "specs/proposed/serch.md", "todo", "--as", "spec-writer")
    assert r.returncode != 0 and "did you mean search?" in r.stderr, r.stderr


def test_a_persons_reply_quoting_the_copy_reaches_an_agent_without_it(repo: Project) -> None:
    """bob's client quotes the whole request, the spec's copy with it; spec-writer's agent reads his
    words and the request's own quoted lines, and the spec from the tree, never from his quote."""
    (repo.dir / SPEC).write_text("# User auth\n\nCOPY-LINE-ONE\nCOPY-LINE-TWO\n")
    mid = repo.send("spec-writer", "review-request", SPEC, "spec-reviewer")
    raw = stored(repo, mid)
    assert our_copies(raw) == [c.text for c in copies(raw)] != []  # the short reader reads what the MIME one does
    request_text = readable(raw).text
    first_line = next(line for line in request_text.splitlines() if line.strip())
    quote = "".join(
        f"> {line}\n" if line else ">\n"
        for line in (request_text + "# User auth\n\nCOPY-LINE-ONE\nCOPY-LINE-TWO").splitlines()
    )
    reply = (
        f"From: spec-reviewer@{repo.app.config.domain}\nTo: spec-writer@{repo.app.config.domain}\n"
        f"Subject: Re: review\nMessage-ID: <bob-reply@x>\nIn-Reply-To: {mid}\nReferences: {mid}\n"
        f"X-Event-Type: question\nX-Artifacts: {SPEC}\n\nWhy one hour? BOBS-OWN-WORDS\n\nOn Monday bob wrote:\n{quote}"
    ).encode()
    repo.app.maildirs.deliver(["spec-writer"], reply)
    (repo.dir / SPEC).write_text("# User auth\n\nTREE-NOW\n")
    role = repo.app.roster.roles["spec-writer"]
    with repo.app.index() as index:
        index.refresh()
        new = [r for r in index.query(["spec-writer"]) if r.message_id == "<bob-reply@x>"]
        ctx = context.build(repo.app, role, index, new)
    assert "BOBS-OWN-WORDS" in ctx.prompt and "TREE-NOW" in ctx.prompt
    assert "COPY-LINE-ONE" not in ctx.prompt and "COPY-LINE-TWO" not in ctx.prompt, ctx.prompt
    assert f"> {first_line}" in ctx.prompt  # the request's own words, quoted, stay
    assert "quoted line(s) of the artifact's copy left out" in ctx.prompt
