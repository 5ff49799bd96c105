"""Owner: where the owner's secret lives and whether its file may be used — one check for every path.

The full commands (``credentials.owner_secret``, which also makes the file on first use) and
``workflow-notify``'s fast path (``cli.fast``) read the secret through ``read``: the file must be
the owner's only (no group or other permission bits) and hold 64 lowercase hex digits.
Start-up time: this module imports ``os`` and ``core.errors`` only (docs/performance.md).
"""

from __future__ import annotations

import os

from workflow.core.errors import WorkflowError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

HEX = frozenset("0123456789abcdef")
LENGTH = 64  # hex digits: 32 random bytes


class MissingError(WorkflowError):
    """There is no owner credential file yet."""


def path(env: Mapping[str, str]) -> str:
    """Where the owner's secret lives (outside every project and mail root): ``$WORKFLOW_CREDENTIALS``,
    else ``$XDG_CONFIG_HOME/workflow/credentials``, else ``~/.config/workflow/credentials``."""
    if env.get("WORKFLOW_CREDENTIALS"):
        return os.path.expanduser(env["WORKFLOW_CREDENTIALS"])
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "workflow", "credentials")


def fit(secret: str) -> bool:
    return len(secret) == LENGTH and HEX.issuperset(secret)


def read(file: str) -> str:
    """The owner's secret in ``file``; MissingError when there is none, WorkflowError (naming the fix)
    when it may not be used."""
    try:
        fd = os.open(file, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise MissingError(f"{file}: no owner credential yet (any workflow command run by you makes it)") from None
    except OSError as e:
        raise WorkflowError(f"{file}: cannot read the owner credential: {e.strerror}") from None
    try:
        if os.fstat(fd).st_mode & 0o077:
            raise WorkflowError(f"{file}: the owner credential is readable by others; run: chmod 600 {file}")
        data = os.read(fd, 4096)
    except OSError as e:
        raise WorkflowError(f"{file}: cannot read the owner credential: {e.strerror}") from None
    finally:
        os.close(fd)
    secret = data.decode("ascii", "replace").strip()
    if not fit(secret):
        raise WorkflowError(f"{file}: not an owner credential (expected 64 hex digits); remove it to make a new one")
    return secret
