"""Errors: the one family of real failures; refusals name the problem so a model can act on it.

WorkflowError
├── UsageError         a command-line value is not one of its choices (exit 2, as click's)
├── ConfigError        a config file or key is missing or has the wrong value
├── MessageError       a message or header value is malformed (CR/LF, unknown event, bad path…)
├── TemplateError      a template is missing or fails to render (names the variable)
├── RosterError        an address or role is unknown, or a role file is invalid
├── RuleError          a named rule refused the message (its text starts with the rule)
│   ├── VisibilityError    a panel visibility boundary would be crossed
│   └── GuardrailError     a workflow guardrail refused it
├── DeliveryError      a Maildir write failed; nothing was left in any new/
├── MailIndexError     the index is unreadable (corrupt file); `workflow reindex` rebuilds it
├── TransportError     the SMTP server refused or failed a message
├── ArtifactError      an artifact is missing, ambiguous, or in two state folders
├── GitError           a git operation was refused (dirty path, illegal transition, no repo)
│   └── GitLayoutError     git must not run here: something planted where it reads or writes
├── ToolError          an agent's tool call was refused (the text goes back to the agent)
├── BridgeError        the IMAP or SMTP side of a bridge failed (login, network, a refused command)
└── DiskFullError      a file system is full: the text names it and what waits (exit 75, try again later)

Outcomes (a message refused by a rule) are errors only at the boundary that must report them;
the CLI turns each into one line and a non-zero exit code.
"""

from __future__ import annotations


class WorkflowError(Exception):
    """Base of every failure this package reports to a user."""

    exit_code = 1


class UsageError(WorkflowError):
    """A command-line value that is not one of the choices (an event type, a state, a panel)."""

    exit_code = 2


class ConfigError(WorkflowError):
    """A config file or key is missing or invalid."""

    exit_code = 3


class MessageError(WorkflowError):
    """A message or a header value is malformed."""

    exit_code = 4


class TemplateError(WorkflowError):
    """A template is missing or does not render."""

    exit_code = 4


class RosterError(WorkflowError):
    """An unknown role/address, or an invalid role definition."""

    exit_code = 5


class RuleError(WorkflowError):
    """A named rule refused a message; the text starts with the rule's name."""

    exit_code = 6

    def __init__(self, rule: str, detail: str) -> None:
        super().__init__(f"{rule}: {detail}")
        self.rule = rule
        self.detail = detail


class VisibilityError(RuleError):
    """Delivery would cross a panel visibility boundary."""


class GuardrailError(RuleError):
    """A guardrail (workflow rule checked at delivery) refused the message."""


class DeliveryError(WorkflowError):
    """A durable Maildir write failed; no copy was left in any new/."""

    exit_code = 7


class MailIndexError(WorkflowError):
    """The SQLite index cannot be used; `workflow reindex` rebuilds it from the Maildirs."""

    exit_code = 8


class TransportError(WorkflowError):
    """The SMTP server refused or failed to take a message."""

    exit_code = 9

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class ArtifactError(WorkflowError):
    """An artifact is missing, ambiguous, or in two state folders."""

    exit_code = 10


class GitError(WorkflowError):
    """A git operation was refused or failed (dirty path, illegal transition, not a repository)."""

    exit_code = 11


class GitLayoutError(GitError):
    """Git must not run in this repository now: its ``.git`` or tree holds something git would
    obey, write through or block on (``artifacts.gitlayout``); the text names the file."""


class ToolError(WorkflowError):
    """An agent's tool call was refused; the text says why and what would work."""


class BridgeError(WorkflowError):
    """The IMAP or SMTP side of a bridge failed (login, network, a refused command)."""

    exit_code = 12


class DiskFullError(WorkflowError):
    """A file system is full; the text names it and what waits until there is room."""

    exit_code = 75  # sysexits.h EX_TEMPFAIL
