"""The short commands' fast path (cli.fast): it parses as click does, imports nothing heavy,
answers exactly as the full command, and never answers from a project that has changed."""

from __future__ import annotations

import base64
import itertools
import marshal
import os
import pickle
import smtplib
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import NamedTuple

import click
import pytest

from helpers.project import Project
from helpers.smtp import server_process
from workflow.cli import fast
from workflow.cli.mail import inbox, search, thread
from workflow.core import configfile, records, snapshot
from workflow.delivery import handshake, submit, xnotify
from workflow.delivery.credentials import client_credential, hash_password, owner_secret

HEAVY = ("click", "typing", "pathlib", "tomllib", "email", "json", "rich")


def _parse_with_click(cmd: click.Command, argv: list[str]) -> dict[str, object] | None:
    try:
        ctx = cmd.make_context(cmd.name or "", list(argv))
    except (click.exceptions.Exit, click.UsageError):
        return None
    params = {k: str(v) if isinstance(v, Path) else v for k, v in ctx.params.items()}  # --config is a Path
    params.pop("mail_root", None)
    return params


def _variants(spec: fast.Spec) -> list[list[str]]:
    """Argument lists over every option of ``spec``: both value forms, values that look like
    options, repeated options, ``--``, flags given values, unknown and missing ones."""
    args = [["spec-reviewer"], ["-"], ["a b"]]
    opts: list[list[str]] = [[]]
    for p in spec.params:
        if p.kind == "flag":
            opts += [[p.decl], [p.decl + "=1"]]
        elif p.kind == "value":
            v = "7" if p.integer else "specs/*/x.md"
            opts += [[p.decl, v], [p.decl + "=" + v], [p.decl, "--json"], [p.decl], [p.decl, v, p.decl, "3"]]
            if p.integer:
                opts.append([p.decl, "seven"])
    opts += [["--config", "workflow.toml"], ["--nope"], ["-h"], ["--help"]]
    out = []
    for a, (o1, o2) in itertools.product(args, itertools.combinations(opts, 2)):
        out += [[*a, *o1, *o2], [*o1, *a, *o2], [*o1, *o2, *a], [*o1, "--", *a], []]
    return out


@pytest.mark.parametrize("cmd,spec", [(inbox, fast.INBOX), (thread, fast.THREAD), (search, fast.SEARCH)])
def test_the_fast_parser_agrees_with_click_or_leaves_the_arguments_to_it(cmd: click.Command, spec: fast.Spec) -> None:
    checked = answered = 0
    for argv in _variants(spec):
        mine = fast.parse(spec, argv)
        if mine is None:
            continue  # click answers these itself (help, errors)
        answered += 1
        theirs = _parse_with_click(cmd, argv)
        assert theirs is not None, f"fast path accepts what click refuses: {argv}"
        assert mine == theirs, argv
        checked += 1
    assert checked > 100 and answered == checked


def _warm(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    """Run a short command until its project's snapshot is saved (a source changed within the
    last 0.1 s is not trusted, so the first run after a change may not save one)."""
    for _ in range(5):
        r = project.run(*args)
        assert r.returncode == 0, r.stderr
        if snapshot.load(str(project.dir / "workflow.toml"), _env()) is not None:
            return r
        time.sleep(0.15)
    raise AssertionError("no snapshot saved")


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}


def _imported(project: Project, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    env = _env()
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "workflow", *args],
        cwd=project.dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    mods = {line.split("|")[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    r.stderr = "".join(line for line in r.stderr.splitlines(keepends=True) if not line.startswith("import time:"))
    return r, mods


def test_short_commands_start_without_heavy_imports_and_answer_as_the_full_command(project: Project) -> None:
    first = project.send("user", "review-request", "specs/proposed/user-auth.md", "spec-reviewer", CONTEXT="auth")
    project.send("spec-reviewer", "approval", "specs/proposed/user-auth.md", "user", reply=first)
    full = ["--mail-root", str(project.mail)]  # the fast path leaves --mail-root to the full command
    for args in (
        ("inbox", "spec-reviewer"),
        ("inbox", "spec-reviewer", "--artifact", "user-auth", "--all", "--event", "review-request"),
        ("thread", first, "--as", "user"),
        ("search", "auth", "--as", "spec-reviewer"),
        ("search", "user auth", "--limit", "1"),
    ):
        _warm(project, *args)
        r, mods = _imported(project, *args)
        assert r.returncode == 0, r.stderr
        heavy = {m for m in mods if m.split(".")[0] in HEAVY}
        assert not heavy, (args, sorted(heavy))
        assert "workflow.core.config" not in mods and "workflow.cli.main" not in mods
        slow = project.run(*full, *args)
        assert slow.returncode == 0, slow.stderr
        assert (r.stdout, r.stderr) == (slow.stdout, slow.stderr), args
        assert r.stdout.strip(), args


def test_a_changed_project_is_never_answered_from_an_old_snapshot(project: Project) -> None:
    project.send("user", "review-request", "specs/proposed/user-auth.md", "spec-reviewer-panel.gpt-5", CONTEXT="gpt")
    r = _warm(project, "inbox", "spec-reviewer-panel")
    assert "1 unread message" in r.stdout
    # gpt-5 leaves the panel: the panel no longer reads its mailbox.
    toml = project.dir / "workflow.toml"
    text = toml.read_text()
    toml.write_text(
        text.replace(
            '[panels.spec-reviewer-panel]\nmembers = ["claude", "gpt-5", "gemini"]',
            '[panels.spec-reviewer-panel]\nmembers = ["claude", "gemini"]',
        )
    )
    r = project.run("inbox", "spec-reviewer-panel")
    assert r.returncode == 0 and "0 unread messages" in r.stdout, r.stdout
    # New mail, delivered behind the index's back, and mail read in a mail client: seen at once.
    r = _warm(project, "inbox", "spec-writer")
    assert "0 unread messages" in r.stdout
    project.send("user", "review-request", "specs/proposed/user-auth.md", "spec-writer", CONTEXT="for the writer")
    r = project.run("inbox", "spec-writer")
    assert "1 unread message" in r.stdout, r.stdout
    _warm(project, "inbox", "spec-writer")
    (new,) = (project.mail / "spec-writer" / "new").iterdir()
    new.rename(project.mail / "spec-writer" / "cur" / f"{new.name}:2,S")
    r = project.run("inbox", "spec-writer")
    assert "0 unread messages" in r.stdout, r.stdout
    # Another mail root: the old one's mail is not shown.
    r = _warm(project, "inbox", "spec-writer", "--all")
    assert "1 message" in r.stdout, r.stdout
    toml.write_text(toml.read_text().replace('mail_root = "mail"', 'mail_root = "mail2"'))
    r = project.run("inbox", "spec-writer", "--all")
    assert r.returncode == 0 and "0 messages" in r.stdout, r.stdout


def test_a_config_restored_byte_for_byte_with_its_mtime_reset_is_not_answered_from_the_snapshot(
    project: Project,
) -> None:
    """Issue 34, item 7: a redirected mail root is loaded and snapshotted, then the file is put
    back byte for byte with its old mtime: the snapshot taken of the redirect must not be used."""
    toml = project.dir / "workflow.toml"
    original = toml.read_bytes()
    toml.write_bytes(original.replace(b'mail_root = "mail"', b'mail_root = "evil"'))  # the same size
    assert _warm(project, "inbox", "spec-writer").returncode == 0  # a full command snapshots the redirect
    path = configfile.lookup(str(toml), _env())
    assert path is not None
    facts = snapshot.load(path, _env())
    assert facts is not None and facts.mail_root.endswith("/evil"), facts
    st = toml.stat()
    toml.write_bytes(original)
    os.utime(toml, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert toml.stat().st_size == st.st_size and toml.stat().st_mtime_ns == st.st_mtime_ns
    assert snapshot.load(path, _env()) is None  # stale: the next command loads the project again


def test_a_damaged_snapshot_or_index_means_the_full_command(project: Project) -> None:
    project.send("user", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    want = _warm(project, "inbox", "spec-reviewer").stdout
    where = Path(snapshot.location(str(project.dir / "workflow.toml"), _env()))
    good = where.read_bytes()
    key, stamps, facts = marshal.loads(good)
    wrong = (*facts[:-2], str(facts[-2]), facts[-1])  # the timeout as text: a field of another type
    for bad in (
        b"",
        b"garbage",
        good[: len(good) // 2],
        marshal.dumps([1, 2]),
        marshal.dumps({"key": 1}),
        marshal.dumps((key, stamps, facts[:-1])),
        marshal.dumps((key, stamps, wrong)),
    ):
        where.write_bytes(bad)
        r = project.run("inbox", "spec-reviewer")
        assert (r.returncode, r.stdout) == (0, want), bad[:20]
    _warm(project, "inbox", "spec-reviewer")
    index = project.mail / ".workflow" / "index.sqlite"
    for suffix in ("-wal", "-shm", ""):
        Path(f"{index}{suffix}").unlink(missing_ok=True)
    index.write_bytes(b"not a database" * 100)
    r = project.run("inbox", "spec-reviewer")
    assert r.returncode != 0 and "workflow reindex" in r.stderr, r.stderr  # what the full command says


def test_what_the_fast_path_does_not_decide_the_full_command_says(project: Project) -> None:
    mid = project.send("user", "review-request", "specs/proposed/user-auth.md", "spec-reviewer")
    _warm(project, "inbox", "spec-reviewer")
    for args, code, said in (
        (("inbox", "spec-reviewr"), 5, "did you mean spec-reviewer"),
        (("inbox", "spec-reviewer", "--event", "reveiw-request"), 2, "did you mean review-request"),
        (("inbox", "spec-reviewer", "--state", "doign"), 2, "did you mean doing"),
        (("thread", "garbage", "--as", "spec-reviewer"), None, "is not a Message-ID"),
        (("thread", mid, "--as", "spec-writer"), None, "is not in spec-writer's mailbox"),
        (("search", "!!!"), None, "has no words"),
        (("inbox", "spec-reviewer", "--limit", "3"), 2, "No such option"),
    ):
        r = project.run(*args)
        assert r.returncode != 0 and (code is None or r.returncode == code), (args, r.returncode, r.stderr)
        assert said in r.stderr, (args, r.stderr)
    r = project.run("inbox", "spec-reviewer", "--help")
    assert r.returncode == 0 and "Example:" in r.stdout
    r = project.run("inbox", "spec-reviewer", "--json")
    assert r.returncode == 0 and r.stdout.lstrip().startswith("{") and mid in r.stdout
    assert fast.run(["inbox", "spec-reviewer"], {**os.environ, "WORKFLOW_RUN": "x"}) is None  # a run's own rules


def test_a_snapshot_is_not_saved_from_sources_changed_during_the_load(tmp_path: Path) -> None:
    src = tmp_path / "workflow.toml"
    src.write_text("[workflow]\n")
    env = {"HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    facts = snapshot.Facts(
        "m", "i", "d", "p", ("s",), ("e",), ("a",), {"r": (("r",), ("r@d",))}, "u", "sock", 30.0, "l"
    )
    assert not snapshot.save(str(src), env, [str(src)], facts, time.time_ns())
    assert snapshot.load(str(src), env) is None
    assert snapshot.save(str(src), env, [str(src)], facts, time.time_ns() + 10**9)
    assert snapshot.load(str(src), env) == facts
    assert snapshot.load(str(src), {**env, "WORKFLOW_MAIL_ROOT": "/elsewhere"}) is None
    src.write_text("[workflow]\nmail_root = 'x'\n")
    assert snapshot.load(str(src), env) is None
    assert (os.stat(snapshot.location(str(src), env)).st_mode & 0o777) == 0o600


class Typed(NamedTuple):
    """A record."""

    a: int
    b: str = "x"

    @property
    def twice(self) -> str:
        return self.b * 2

    def bump(self) -> Typed:
        return self._replace(a=self.a + 1)


class Lean(records.NamedTuple):
    """A record."""

    a: int
    b: str = "x"

    @property
    def twice(self) -> str:
        return self.b * 2

    def bump(self) -> Lean:
        return self._replace(a=self.a + 1)


def test_lean_records_behave_as_typing_namedtuples() -> None:
    t, lean = Typed(1), Lean(1)
    assert (lean._fields, lean._field_defaults) == (t._fields, t._field_defaults)
    assert (lean.twice, tuple(lean.bump()), lean.__doc__, repr(lean)) == (
        t.twice,
        tuple(t.bump()),
        t.__doc__,
        "Lean(a=1, b='x')",
    )
    assert lean == t and hash(lean) == hash(t) and lean._asdict() == t._asdict()
    assert pickle.loads(pickle.dumps(lean)) == lean and type(pickle.loads(pickle.dumps(lean))) is Lean
    assert Lean.__qualname__ == "Lean" and Lean.__module__ == __name__
    with pytest.raises(TypeError):

        class Bad(records.NamedTuple):
            a: int = 1
            b: int  # type: ignore[misc]

    with pytest.raises(AttributeError):

        class Worse(records.NamedTuple):
            a: int

            def _replace(self) -> None:  # type: ignore[override]
                pass


def _notify_warm(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    for _ in range(5):
        r = project.run(*args, tool="workflow-notify")
        assert r.returncode == 0, r.stderr
        if snapshot.load(str(project.dir / "workflow.toml"), _env()) is not None:
            return r
        time.sleep(0.15)
    raise AssertionError("no snapshot saved")


def _stored(project: Project, mid: str) -> bytes:
    (found,) = [p for p in project.new_files("spec-reviewer") if mid.strip("<>").encode() in p.read_bytes()]
    return found.read_bytes()


def test_notify_through_the_server_starts_fast_and_sends_what_the_command_sends(project: Project) -> None:
    args = ("review-request", "specs/proposed/user-auth.md", "spec-reviewer,spec-reviewer-panel", "CONTEXT=déjà vu")
    with server_process(project.dir) as (_, port):
        _notify_warm(project, "status-update", "specs/proposed/user-auth.md", "spec-writer")
        r = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "from workflow.cli.entry import notify; notify()", *args],
            cwd=project.dir,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 0, r.stderr
        mods = {line.split("|")[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
        heavy = {m for m in mods if m.split(".")[0] in (*HEAVY, "sqlite3", "smtplib")}
        assert not heavy and "workflow.core.config" not in mods, sorted(heavy)
        said = [line for line in r.stderr.splitlines() if not line.startswith("import time:")]
        fast_mid = r.stdout.strip()
        slow = project.run("--mail-root", str(project.mail), *args, tool="workflow-notify")  # the full command
        assert slow.returncode == 0, slow.stderr
        where = f"(smtp: {project.app.config.state.socket})"
        assert said == slow.stderr.splitlines() and where in said[0], (said, slow.stderr)
        slow_mid = slow.stdout.strip()
        a, b = _stored(project, fast_mid), _stored(project, slow_mid)

        def shape(raw: bytes, mid: str) -> list[bytes]:  # all but what names the message or its date
            token = mid[1:].split("@")[0].encode()
            return [ln for ln in raw.split(b"\n") if token not in ln and not ln.startswith((b"Date:", b"Message-ID:"))]

        assert shape(a, fast_mid) == shape(b, slow_mid) and len(shape(a, fast_mid)) > 10
        assert "déjà vu".encode() in a or b"d=C3=A9j=C3=A0 vu" in a
        # What the server refuses, the full command says, as it would have anyway; nothing is sent twice.
        before = len(project.new_files())
        for bad, code, text in (
            (("reveiw-request", "specs/proposed/user-auth.md", "spec-reviewer"), 4, "unknown event type"),
            (("question", "specs/proposed/user-auth.md", "nobody"), None, "nobody"),
            (
                ("--from", "spec-writer", "question", "specs/proposed/nope.md", "spec-reviewer", "lower=x"),
                4,
                "variable name 'lower'",
            ),
        ):
            r = project.run(*bad, tool="workflow-notify")
            assert r.returncode != 0 and (code is None or r.returncode == code), (bad, r.returncode, r.stderr)
            assert text in r.stderr, (bad, r.stderr)
        assert len(project.new_files()) == before


def test_xnotify_holds_every_boundary_a_message_does(tmp_path: Path) -> None:
    from helpers.project import users_project

    project = users_project(tmp_path, f"writer:{hash_password('pw')}:spec-writer\n")
    req = xnotify.Request(
        "question", "specs/proposed/user-auth.md", "spec-reviewer", "spec-writer", "", ("QUESTION=Why?",)
    )
    with server_process(project.dir) as (_, port):

        def as_login(login: str, secret: str, who: str) -> tuple[int, bytes]:
            """XNOTIFY as a person's login (PLAIN: ``submit`` logs in as the owner only)."""
            with smtplib.SMTP("127.0.0.1", port, timeout=10) as s:
                try:
                    s.login(login, secret)
                except smtplib.SMTPAuthenticationError as e:
                    return e.smtp_code, e.smtp_error
                return s.docmd(xnotify.COMMAND, xnotify.encode(req._replace(sender=who)))

        owner = client_credential(mail_root=project.app.config.mail_root)
        mid, rcpts = submit.submit(str(project.app.config.state.socket), 10, owner.login, owner.secret, req)
        assert rcpts == ["spec-reviewer@workflow.local"] and mid.endswith("@workflow.local>")
        assert as_login("writer", "pw", "spec-writer")[0] == 250
        for login, secret, who, said in (
            ("writer", "pw", "user", 550),  # a login may send only as its roles
            ("writer", "wrong", "spec-writer", 535),
        ):
            assert as_login(login, secret, who)[0] == said
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            f = s.makefile("rwb")
            f.readline()  # the greeting
            for line, answer in (
                (b"EHLO x", b"250 "),
                (b"XNOTIFY " + xnotify.encode(req).encode(), b"530"),  # not logged in
                (b"AUTH PLAIN " + base64.b64encode(b"\0writer\0pw"), b"235"),
                (b"XNOTIFY not*base64", b"501"),
                (b"MAIL FROM:<spec-writer@workflow.local>", b"250"),
                (b"XNOTIFY " + xnotify.encode(req).encode(), b"503"),  # inside a transaction
            ):
                f.write(line + b"\r\n")
                f.flush()
                got = f.readline()
                while got[3:4] == b"-":
                    got = f.readline()
                assert got.startswith(answer), (line, got)
    assert len(project.new_files("spec-reviewer")) == 2


def test_notify_that_may_have_been_delivered_is_not_sent_again(project: Project) -> None:
    """A server that takes the request and hangs up before answering: the command says so and
    does not fall back to sending the message a second way."""
    path = project.app.config.state.socket  # where the owner's commands find the server
    path.parent.mkdir(parents=True, exist_ok=True)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen()
    seen: list[bytes] = []

    def serve() -> None:
        for _ in range(10):
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # the test closed the listener: it is over
            with conn, conn.makefile("rwb") as f:
                f.write(b"220 fake\r\n")
                f.flush()
                login = mine = theirs = ""
                while line := f.readline():
                    seen.append(line.split(b" ")[0])
                    if line.startswith(b"XNOTIFY"):
                        break  # took it, and hangs up without a word
                    if line.startswith(b"AUTH"):  # the project's server: it proves it holds the owner's secret
                        login, mine = base64.b64decode(line.split()[2]).decode().split(" ")
                        theirs = "ab" * 16
                        f.write(b"334 " + base64.b64encode(theirs.encode()) + b"\r\n")
                    elif login:
                        key = handshake.key_of(login, owner_secret(_env()))
                        f.write(f"235 2.7.0 ok {handshake.proof(key, 'server', login, mine, theirs)}\r\n".encode())
                        login = ""
                    else:
                        f.write(b"250 ok\r\n")
                    f.flush()

    threading.Thread(target=serve, daemon=True).start()
    owner_secret(_env())  # the owner's credential, as a server or an earlier command would have made it
    r = _warm(project, "inbox", "spec-reviewer")  # the snapshot: the fast path is taken
    assert r.returncode == 0
    r = project.run("status-update", "specs/proposed/user-auth.md", "spec-writer", tool="workflow-notify")
    assert r.returncode == 9 and "may have been delivered" in r.stderr, (r.returncode, r.stderr)
    assert seen.count(b"XNOTIFY") == 1 and not project.new_files("spec-writer")
    listener.close()
