"""State directory: every path under ``<mail root>/.workflow/``, named in one place.

The Maildirs are the mail; this directory holds what the tools keep beside it: the index (a
cache of the Maildirs), agentd's task queue and log, the panels' sessions, the Slack bridge's
queue, run locks, run logs, the outbox of unsent notifications, the reply loop's conversations
and the Gmail bridge's position. Nothing here is ever delivered mail.
"""

from __future__ import annotations

from pathlib import Path

NAME = ".workflow"


class StateDir:
    """The state directory of one mail root."""

    __slots__ = ("root",)

    def __init__(self, root: Path) -> None:
        self.root = root

    def __repr__(self) -> str:
        return f"StateDir({str(self.root)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StateDir) and other.root == self.root

    def __hash__(self) -> int:
        return hash(self.root)

    @classmethod
    def of(cls, mail_root: Path) -> StateDir:
        return cls(mail_root / NAME)

    @property
    def index(self) -> Path:
        """The SQLite index of every stored copy (a cache; `workflow reindex` rebuilds it)."""
        return self.root / "index.sqlite"

    @property
    def project(self) -> Path:
        """The project that owns this mail root: its directory, one line (``core.ownership``)."""
        return self.root / "project"

    @property
    def host(self) -> Path:
        """Which of ``[hosts]`` this machine is, one line (``core.hosts``; ``workflow host NAME``)."""
        return self.root / "host"

    @property
    def relay(self) -> Path:
        """Where this host's Postfix instance is (``workflow postfix --write DIR``), one line."""
        return self.root / "relay"

    @property
    def relay_client(self) -> tuple[Path, Path]:
        """The certificate and key this host's smtpd proves itself to its Postfix with (no agent
        sees the state directory: a run's agent cannot hand that Postfix mail)."""
        return self.root / "relay-client.pem", self.root / "relay-client.key"

    @property
    def smtpd(self) -> Path:
        """Where the running SMTP server says it listens (host, port, pid): ``delivery.address``."""
        return self.root / "smtpd.json"

    @property
    def sockets(self) -> Path:
        """The owner's socket's directory (0700, in no sandbox: ``delivery.local``)."""
        return self.root / "sock"

    @property
    def socket(self) -> Path:
        """The running ``workflow smtpd``'s socket for the owner's logins, never on TCP."""
        return self.sockets / "smtpd"

    @property
    def web_socket(self) -> Path:
        """The running ``workflow web``'s socket: the owner asks it for a one-time login link."""
        return self.sockets / "web"

    @property
    def run_sockets(self) -> Path:
        """The runs' sockets' directory: bound read-only into every sandbox, so a run's agent
        reaches its server and cannot put a socket of its own in its place."""
        return self.root / "run-sock"

    @property
    def runs_socket(self) -> Path:
        """The running ``workflow smtpd``'s socket for runs' logins."""
        return self.run_sockets / "smtpd"

    @property
    def server_sockets(self) -> tuple[Path, Path]:
        """Where ``workflow smtpd`` listens besides TCP: the owner's socket and the runs' socket."""
        return self.socket, self.runs_socket

    def run_socket(self, pid: int, tid: int) -> Path:
        """The socket of the server a run starts for itself when none runs: named by its process
        and its thread (``threading.get_native_id``, unique on the host while it lives), so two
        runs of one process at once (a bridge's) have one each, and a killed run's stale socket
        is replaced by the next run that gets its ids."""
        return self.run_sockets / f"run.{pid}.{tid}"

    @property
    def tasks(self) -> Path:
        """agentd's task queue, role state and token usage."""
        return self.root / "agentd.sqlite"

    @property
    def daemon_lock(self) -> Path:
        """Held by the running agentd (pid, since when): one daemon per mail root."""
        return self.root / "agentd.lock"

    @property
    def agentd_log(self) -> Path:
        """agentd's JSON-lines log, one line per task state change."""
        return self.root / "agentd.jsonl"

    @property
    def refusals(self) -> Path:
        """How many times the SMTP server refused, by command, code and rule (for ``/metrics``)."""
        return self.root / "refusals.sqlite"

    @property
    def panels(self) -> Path:
        """Panel sessions, sealed assessments and the seals delivery reads."""
        return self.root / "panels.sqlite"

    @property
    def spend(self) -> Path:
        """The tokens the bridges' own model calls (their classifiers) spent, per account and day."""
        return self.root / "spend.sqlite"

    @property
    def slack(self) -> Path:
        """The Slack bridge's events, tasks and todo list."""
        return self.root / "slack.sqlite"

    @property
    def gmail(self) -> Path:
        """The Gmail bridge's position: UIDVALIDITY and the last imported UID."""
        return self.root / "bridge-gmail.json"

    @property
    def reviewed(self) -> Path:
        """The artifact versions review mail carried, by git blob id: the diff's "before"."""
        return self.root / "reviewed"

    @property
    def locks(self) -> Path:
        return self.root / "locks"

    def lock(self, name: str) -> Path:
        """The run lock of one role (or panel)."""
        return self.locks / f"{name}.lock"

    @property
    def git_lock(self) -> Path:
        """The project's git lock: every owner-side git write (moves, run commits, rollbacks, the
        post-commit hook) holds it, so concurrent runs queue instead of meeting on ``index.lock``."""
        return self.root / "git.lock"

    @property
    def commits(self) -> Path:
        """The ids of the commits the owner's own code made (``artifacts.plumbing``), one a line:
        any other commit made while a run was open is the run's agent's (or a person's own)."""
        return self.root / "commits"

    @property
    def decisions_lock(self) -> Path:
        """Held while a decision made in the cockpit is carried out (its mail, its move): whoever
        finishes one a crash cut short (agentd, the next cockpit) waits for the one in hand."""
        return self.root / "decisions.lock"

    def cli(self, name: str) -> Path:
        """One role's (or panel member's) own agent-CLI state — Claude Code's config dir, Codex's
        home: its settings, sessions and transcripts, never the owner's and never another role's."""
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name).lstrip(".") or "_"
        return self.root / "cli" / safe

    @property
    def notified(self) -> Path:
        """The post-commit hook's ledger of moves notified (out of ``.git``, where a run's agent
        could write it)."""
        return self.root / "notified"

    @property
    def runs(self) -> Path:
        """Each agentd run's log and result file, and each role's mail-during-the-run file."""
        return self.root / "runs"

    @property
    def outbox(self) -> Path:
        """Notifications not sent yet (the server was down); ``failed/`` holds refused ones."""
        return self.root / "outbox"

    @property
    def outbox_failed(self) -> Path:
        return self.outbox / "failed"

    @property
    def sessions(self) -> Path:
        """Each role's agent session per outside conversation (``agents.asked``): the next run on
        that conversation resumes it."""
        return self.root / "sessions"

    @property
    def conversations(self) -> Path:
        """The reply loop's conversations with outside correspondents."""
        return self.root / "conversations"
