"""Transaction: what a run does to the world, made real only when the run succeeds.

Every message a run sends — through a tool, or through ``workflow-notify`` / ``workflow move
--notify`` called by a command-backend agent inside the run (``$WORKFLOW_RUN`` names it) — is
checked at once (every delivery rule, so a refusal reaches the agent while it can still act on
it) and *staged* in the run's directory, ``<state>/runs/ROLE.run/``. Artifact moves happen at once
(later checks must see them) and are journalled before they are committed. What the run writes
to artifacts (``write_artifact``, or a shell agent's own edits) stays uncommitted in the working
tree until the run ends (``artifacts.edits``: a snapshot of the artifact roots is taken when the
run begins); an artifact the run wrote moves with its edits, in the move's commit.

* **Commit** (the run succeeded): the run's remaining artifact edits are committed as its role
  (one commit; if git refuses it, the run fails instead and is rolled back), then the run is
  marked committing, each staged message is sent
  (a crash here is finished by the next run: resending is harmless, the server stores a
  Message-ID with the same bytes once), the mail handed to the run is marked read, the
  directory is removed.
* **Roll back** (the run failed, timed out, was interrupted or killed): staged mail is dropped,
  journalled moves are reverted with a commit each, every artifact the run wrote is put back as
  it was (a file it created is removed; what its moves committed is committed back), the handed
  mail stays unread for the next run.
* **Recover**: a directory left by a crashed run is finished by the next run of the role, once it
  holds the role's lock: committed forward when it was committing, rolled back otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from workflow.agents.contain import leftovers
from workflow.app import App
from workflow.artifacts import agentfiles, edits, history
from workflow.artifacts.gitlock import project_lock
from workflow.artifacts.gitrepo import Repo
from workflow.artifacts.gitstate import Start, head_problem, shown
from workflow.artifacts.move import revert
from workflow.core.config import Config
from workflow.core.errors import DeliveryError, GitError, RuleError, ToolError, TransportError, WorkflowError
from workflow.core.files import fsync_dir, read_untrusted, write_atomic
from workflow.core.locate import Artifact, parse_path
from workflow.core.statedir import StateDir
from workflow.delivery import outbox
from workflow.delivery.credentials import mint
from workflow.delivery.staging import COMMITTING, OPEN, ROLLING_BACK, RunBox, Staged, describe
from workflow.delivery.transport import Transport
from workflow.mail.rows import Row


class Journalled(NamedTuple):
    before: Artifact
    after: Artifact


def run_dir(state: StateDir, role: str) -> Path:
    return state.runs / f"{role}.run"


class Run(RunBox):
    """One run's transaction, on disk so other processes (the server, the agent's CLI) can join it.

    ``dir`` is the owner's (state, token digest, staged mail: the sandbox hides it); ``agent``, a
    directory inside it, is the only part an agent sees (``$WORKFLOW_RUN``): the Message-IDs it
    was handed, the mail that arrived during the run, the threads it may reply to, and the journal
    of the moves it made."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.agent = path / "agent"
        self.journal = self.agent / "moves.jsonl"  # the sandboxed `workflow move`'s: the agent's, untrusted
        self.own_journal = self.dir / "moves.jsonl"  # the run's tools' moves: the owner's side, out of reach
        self.token = ""  # the run credential: known to the run-role that began the run, and its agent

    # -- lifecycle

    @classmethod
    def begin(
        cls, state: StateDir, role: str, handed: Sequence[Row], config: Config | None = None, shell: bool = False
    ) -> Run:
        """A fresh run of ``role`` handed these copies (the caller holds the role's lock)."""
        run = cls(run_dir(state, role))
        if run.dir.exists():
            raise ToolError(f"{run.dir} is left from an earlier run; recover it first")
        run.outbox.mkdir(parents=True)
        run.agent.mkdir()
        run.token, digest = mint()
        ids = "".join(f"{r.message_id}\n" for r in handed if r.message_id)
        (run.agent / "handed").write_text(ids)
        info: dict[str, object] = {"role": role, "pid": os.getpid(), "started": time.time()}
        write_atomic(run.agent / "info.json", json.dumps(info), durable=False)  # the agent's copy: not for recovery
        run.know(handed)
        run.write_info(
            {
                **info,
                "state": OPEN,
                "token_sha256": digest,
                "handed": [[r.mailbox, r.key] for r in handed],
                "handed_ids": [r.message_id for r in handed if r.message_id],
                "shell": shell,  # a shell agent's edits are found by diffing; a tools-only run's are listed
            }
        )
        if config is not None:  # what the artifact roots hold now: a failed run is put back to it
            repo = Repo.find(config)
            with project_lock(config):  # never another run's move half done
                base = edits.snapshot(config, repo).blobs
            write_atomic(run.dir / "base.json", json.dumps(base), mode=0o600, sync_dir=False)
            begun = edits.start(config, repo)
            write_atomic(run.dir / "head", begun.head, mode=0o600, sync_dir=False)
            write_atomic(run.dir / "head-file", begun.head_file, mode=0o600, sync_dir=False)
            write_atomic(run.dir / "git.json", json.dumps(begun.entries), mode=0o600, sync_dir=False)
            write_atomic(run.dir / "staged.json", json.dumps(begun.staged), mode=0o600, sync_dir=False)
            write_atomic(run.dir / "refs.json", json.dumps([begun.refs, begun.flagged]), mode=0o600, sync_dir=False)
            if begun.packed is not None:
                write_atomic(run.dir / "packed-refs", begun.packed, mode=0o600, sync_dir=False)
            agentfiles.record(config, run.dir / "agent-files")
            fsync_dir(run.dir)  # every file above durable before the agent starts
        return run

    def know(self, rows: Sequence[Row]) -> None:
        """Tell the agent about messages it may reply to (their subject and references thread it)."""
        path = self.agent / "threads.json"  # in the agent's reach: read as untrusted input
        try:
            known = json.loads(read_untrusted(path, MAX_RUN_FILE) or b"{}")
        except ValueError:
            known = {}
        if not isinstance(known, dict):
            known = {}
        for r in rows:
            if r.message_id:
                known[r.message_id] = {"subject": r.subject, "refs": list(r.refs)}
        write_atomic(path, json.dumps(known), durable=False)  # the agent's: nothing recovers from it

    def handed_ids(self) -> list[str]:
        """The Message-IDs handed to the run (from the owner's own record: ``agent/handed`` is
        the agent's copy, and the agent may have rewritten it)."""
        ids = self.info().get("handed_ids")
        return [str(i) for i in ids] if isinstance(ids, list) else []

    # -- what the run does

    def intend_move(self, before: Artifact, after: Artifact) -> None:
        """Journal a move of the run's tools before it is committed, so a rollback finds it
        whatever happens next — in the owner's part of the run, which the agent cannot reach
        (it could delete, forge or replace a journal in its own directory)."""
        if not self.is_open():
            raise ToolError("the run has ended: it moves nothing more")
        append_entry(self.own_journal, before, after)

    def wrote(self, path: str) -> None:
        """Record an artifact the run wrote through its tools (the owner's side: the agent cannot)."""
        if not self.is_open():
            raise ToolError("the run has ended: it writes nothing more")
        with open(self.dir / "written", "a", encoding="utf-8") as f:
            f.write(path + "\n")

    def written(self) -> set[str]:
        try:
            return set((self.dir / "written").read_text(encoding="utf-8").split("\n")) - {""}
        except OSError:
            return set()

    def base(self) -> dict[str, str] | None:
        try:
            data = json.loads((self.dir / "base.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else None

    def edits(self, config: Config) -> edits.Changed:
        """The run's uncommitted artifact edits now (``artifacts.edits.changed``)."""
        base = self.base()
        if base is None:
            return edits.Changed([], [])
        others: set[str] = set()
        for d in self.dir.parent.glob("*.run"):
            if d != self.dir:
                others |= Run(d).written()
        return edits.changed(config, base, None if self.info().get("shell") else self.written(), others)

    def _text(self, name: str) -> str:
        try:
            return (self.dir / name).read_text(encoding="utf-8")
        except OSError:
            return ""

    def began_at(self) -> str:
        """HEAD when the run began ("" when unknown, or no commit yet)."""
        try:
            return (self.dir / "head").read_text(encoding="utf-8").strip()
        except OSError:
            return ""

    def begun(self) -> Start:
        """``.git`` when the run began (kept in the owner's part of the run directory)."""
        try:
            entries = json.loads((self.dir / "git.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            entries = None
        try:
            packed: bytes | None = (self.dir / "packed-refs").read_bytes()
        except OSError:
            packed = None
        try:
            kept = json.loads((self.dir / "staged.json").read_text(encoding="utf-8"))
            staged = {str(p): (str(e[0]), str(e[1])) for p, e in kept.items()} if isinstance(kept, dict) else None
        except (OSError, ValueError, TypeError, IndexError, AttributeError):
            staged = None
        try:
            named, marked = json.loads((self.dir / "refs.json").read_text(encoding="utf-8"))
            refs = {str(k): str(v) for k, v in named.items()}
            flagged = tuple(map(str, marked))
        except (OSError, ValueError, TypeError, AttributeError):
            refs, flagged = None, None
        return Start(
            self.began_at(),
            self._text("head-file"),
            tuple(map(str, entries)) if isinstance(entries, list) else None,
            packed,
            staged,
            refs,
            flagged,
        )

    def commit_edits(self, app: App) -> list[str]:
        """Commit what the run wrote, as its role (before the run commits its mail); GitError when
        git refuses, or when a commit made during the run changed a control file (the owner's
        config, roles, templates): then the run must fail, and its rollback restores them."""
        found = edits.planted(app.config, self.begun().entries)
        if found:
            raise GitError(
                f"the run planted {shown(app.config, found)} in .git or where git reads: the owner's git would "
                "obey it, write through it or block on it"
            )
        edits.check_refs(app.config, self.begun())
        broken = head_problem(app.config, self.began_at())
        if broken:
            raise GitError(f"the run broke the branch: {broken}")
        links = edits.gitlinks_since(app.config, self.began_at()) + edits.staged_gitlinks(app.config, self.begun())
        if links:
            raise GitError(
                f"the run committed or staged embedded repositories ({', '.join(links)}): a person's git would "
                "enter them and obey their config"
            )
        touched = history.control_changes(app.config, self.began_at())
        if touched:
            raise GitError(
                f"a commit made during the run changed {', '.join(touched)}: the control files are the owner's"
            )
        role = str(self.info().get("role", "run-role"))
        strangers = history.foreign_commits(app.config, self.began_at(), role)
        if strangers:
            raise GitError(
                f"the run made commits as someone else ({', '.join(strangers[:5])}): a run's commits are "
                f"authored and committed as {role} only"
            )
        written = agentfiles.changed(app.config, self.dir / "agent-files")
        if written:
            raise GitError(
                f"the run wrote {', '.join(written)}: instructions, settings or configs that agents and the "
                "owner's commands obey; a run never writes them"
            )
        wrote = self.edits(app.config)
        paths = wrote.paths
        lines = edits.check_index(app.config, self.begun(), paths)
        if wrote.ignored:  # the owner's .gitignore says what history holds
            lines.append(f"not committed (git ignores them): {', '.join(wrote.ignored)}")
        if not paths:
            return lines
        write_atomic(self.dir / "edits.json", json.dumps(paths), mode=0o600)  # a rollback after a crash finds them
        done = edits.commit(app.config, role, paths, "edit")
        if done.sha:
            lines.append(f"committed {', '.join(done.paths)} as {role} (commit {done.sha[:10]})")
        if done.skipped:
            lines.append(f"not committed (symlinks are never committed): {', '.join(done.skipped)}")
        return lines

    def committed_edits(self) -> list[str]:
        try:
            data = json.loads((self.dir / "edits.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        return [str(p) for p in data] if isinstance(data, list) else []

    def moves(self, config: Config | None = None) -> list[Journalled]:
        """The journalled moves: the run's tools' (the owner's journal), then its shell's — the
        agent's own ``workflow move`` writes that one, so every entry there is untrusted: with
        ``config``, only a move of one artifact between two of its state folders inside an
        artifact root is taken (a forged entry could name any path)."""
        out: list[Journalled] = []
        for journal in (self.own_journal, self.journal):
            data = read_untrusted(journal, MAX_RUN_FILE)
            for line in (data or b"").decode("utf-8", "replace").splitlines():
                try:
                    d = json.loads(line)
                    m = Journalled(Artifact(*map(str, d["before"])), Artifact(*map(str, d["after"])))
                except (ValueError, KeyError, TypeError):
                    continue
                if (config is None or _legal_entry(config, m)) and m not in out:
                    out.append(m)
        return out

    # -- how it ends

    def commit(self, app: App, transport: Transport) -> list[str]:
        """The run succeeded: send what it staged, mark what it was handed read, end it (a crash
        after it is marked committing is finished forward by the next run of the role)."""
        info = self.leave_open(COMMITTING)  # the run's token dies; nothing more can be staged
        lines = []
        for s in self.staged():
            lines.append(_send(app, transport, s))
            s.path.unlink(missing_ok=True)
        handed = info.get("handed")
        marked = sum(
            app.maildirs.mark_seen(str(box), str(key)) for box, key in (handed if isinstance(handed, list) else [])
        )
        lines.append(f"{marked} message(s) marked read")
        shutil.rmtree(self.dir, ignore_errors=True)
        return lines

    def rollback(self, app: App, why: str, *, crashed: bool = False) -> list[str]:
        """The run failed: drop what it staged, revert what it moved, put back what it wrote, leave
        its mail unread. ``crashed``: finishing a run that died — files may have changed since, by
        anyone, so what is discarded is kept (``edits.restore``), as for every shell agent's run."""
        info = self.leave_open(ROLLING_BACK)  # no stage, move or login may join it any more
        lines = []
        dropped = self.staged()
        if dropped:
            lines.append(f"{len(dropped)} staged message(s) not sent: " + ", ".join(s.message_id for s in dropped))
        role = str(info.get("role", "run-role"))
        keep = self.dir.parent / f"{self.dir.name}.planted-{int(time.time())}"
        try:  # first: git refuses to run while anything is planted in .git
            lines += edits.neutralize(app.config, keep, self.began_at(), role, self.begun())
        except (GitError, OSError) as e:
            lines.append(f"could not take away what the run planted in .git: {e}")
        try:
            lines += agentfiles.restore(app.config, self.dir / "agent-files", keep)
        except OSError as e:
            lines.append(f"could not put back the agent files the run wrote: {e}")
        moved = self.moves(app.config)
        pending = self.edits(app.config).all  # before the moves go back: a reverted move is not an edit
        reverted: list[Journalled] = []
        for m in reversed(moved):
            try:
                sha = revert(app.config, m.before, m.after, role, f"The run failed ({why}); its move is undone.")
            except GitError as e:
                lines.append(f"could not revert the move {m.before.path} → {m.after.path}: {e}")
                continue
            if sha:
                reverted.append(m)
            lines.append(
                f"reverted the move {m.before.path} → {m.after.path} (commit {sha[:10]})"
                if sha
                else f"left {m.after.path} alone: it is no longer where the failed run put it"
            )
        since = self.began_at()
        touched = history.control_changes(app.config, since)
        if touched:
            try:
                sha = edits.restore_control(app.config, touched, role, f"The run failed ({why}).")
                lines.append(f"restored {', '.join(touched)} as the working tree has them (commit {(sha or '')[:10]})")
            except GitError as e:
                lines.append(f"could not restore the control files {', '.join(touched)}: {e}")
        base = self.base()
        if base is not None:
            # only moves put back: one someone moved on since is left where it is, with its content
            committed = {p for m in reverted for p in (m.before.path, m.after.path)} | set(self.committed_edits())
            if info.get("shell"):  # what its agent committed with git itself, behind the tools' back
                committed |= set(history.committed_since(app.config, since)) - {
                    p for m in moved if m not in reverted for p in (m.before.path, m.after.path)
                }
            try:
                lines += edits.restore(
                    app.config,
                    base,
                    set(pending) | committed,
                    committed,
                    role,
                    f"The run failed ({why}).",
                    keep=crashed or bool(info.get("shell")),
                )
            except GitError as e:
                lines.append(f"could not put back what the run wrote: {e}")
        shutil.rmtree(self.dir, ignore_errors=True)
        return lines


MAX_RUN_FILE = 1 << 20  # what the owner reads of a file in the agent's part of a run


def _legal_entry(config: Config, m: Journalled) -> bool:
    """Whether a journal entry names one artifact moved between two of its state folders."""
    a, b = parse_path(m.before.path, config), parse_path(m.after.path, config)
    return (
        a == m.before
        and b == m.after
        and a.key == b.key
        and a.state != b.state
        and ".." not in a.name.split("/")
        and not a.name.startswith("/")
    )


def journal_move(agent_dir: Path, before: Artifact, after: Artifact) -> None:
    """Append one move to a run's shell journal (``$WORKFLOW_RUN/moves.jsonl``), durably."""
    append_entry(agent_dir / "moves.jsonl", before, after)


def append_entry(path: Path, before: Artifact, after: Artifact) -> None:
    """Append one journal line durably — never through a symlink, never waiting on a FIFO, only
    to a regular file (a ToolError otherwise: the move is not made)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except OSError as e:
        raise ToolError(f"cannot journal the move in {path}: {e.strerror} (a file planted there?)") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ToolError(f"cannot journal the move in {path}: not a regular file")
        os.write(fd, (json.dumps({"before": list(before), "after": list(after)}) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def _send(app: App, transport: Transport, s: Staged) -> str:
    """Send one staged message; what cannot be sent now waits in the outbox (refused: failed/)."""
    try:
        where = transport.send(s.raw, s.sender, s.recipients)
        return f"sent {s.what} {s.message_id} ({where})"
    except (RuleError, TransportError, DeliveryError) as e:
        failed = isinstance(e, RuleError) or (
            isinstance(e, TransportError) and e.code is not None and 500 <= e.code < 600
        )
        q = outbox.put(app.config, s.raw, s.sender, s.recipients, s.what, str(e), failed=failed)
        return f"not sent {s.what} {s.message_id}: {e} (kept in {q})"


class RunTransport:
    """The transport of code inside a run: checks a message at once and stages it in the run."""

    def __init__(self, app: App, run: Run) -> None:
        self.app, self.run = app, run

    def send(self, raw: bytes, sender: str, recipients: Sequence[str]) -> str:
        with self.app.index() as index:
            plan = self.app.deliverer.prepare(raw, recipients, index)  # every check, nothing written
        self.run.stage(
            plan.raw, sender, recipients, plan.message_id, describe(plan.parsed.event, plan.parsed.artifacts)
        )
        return f"staged in the run of {self.run.role}: sent when it succeeds"


def recover(app: App, role: str, transport: Transport, echo: Callable[[str], None]) -> None:
    """Finish what a crashed run of ``role`` left (call holding the role's lock)."""
    run = Run(run_dir(app.config.state, role))
    if not run.dir.exists():
        return
    killed = leftovers(run.dir)
    if killed:
        echo(f"{role}: killed {killed} process(es) the crashed run left")
    info = run.info()
    try:
        if info.get("state") == COMMITTING:
            echo(f"{role}: finishing the commit of a run that ended before it was done")
            lines = run.commit(app, transport)
        else:
            echo(f"{role}: rolling back a run that ended without succeeding (pid {info.get('pid', '?')})")
            lines = run.rollback(app, "it was interrupted", crashed=True)
    except (WorkflowError, OSError, ValueError) as e:
        # whatever the run left (the agent writes part of it), the role must not be wedged on it
        aside = run.dir.with_name(f"{run.dir.name}.broken-{int(time.time())}")
        os.replace(run.dir, aside)
        echo(f"{role}: could not finish the run it left ({e}); kept it in {aside} for you to read")
        return
    for line in lines:
        echo(f"  {line}")
