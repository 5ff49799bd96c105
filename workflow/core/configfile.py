"""Config file: which workflow.toml a command uses — the one lookup of the full and the fast path.

``--config``, else ``$WORKFLOW_CONFIG``, else the nearest workflow.toml at or above the current
directory; never a workflow.toml found inside another project (an agent may have written it in
an artifact folder, waiting for the owner to run a command below it). ``core.config.load_config``
and ``cli.fast`` both call ``lookup``, so they never pick different files. Start-up time: this
module imports ``os`` and ``core.errors`` only (docs/performance.md).
"""

from __future__ import annotations

import os

from workflow.core.errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

CONFIG_NAME = "workflow.toml"


def nearest(start: str) -> str | None:
    """The nearest workflow.toml at or above ``start`` (an absolute, resolved directory)."""
    d = start
    while True:
        candidate = os.path.join(d, CONFIG_NAME)
        if os.path.isfile(candidate):
            return candidate
        up = os.path.dirname(d)
        if up == d:
            return None
        d = up


def outer_config(found: str) -> str | None:
    """The workflow.toml of a project that holds the config ``found`` (one further up, up to the
    top of the git repository ``found`` is in), or None."""
    d = os.path.dirname(found)
    while not os.path.lexists(os.path.join(d, ".git")):
        up = os.path.dirname(d)
        if up == d:
            return None
        d = up
        candidate = os.path.join(d, CONFIG_NAME)
        if os.path.isfile(candidate):
            return candidate
    return None


def find_config(start: str) -> str | None:
    """The workflow.toml found from ``start`` (absolute, resolved); ConfigError when it lies
    inside another project: pass --config to use it."""
    found = nearest(start)
    if found is None:
        return None
    outer = outer_config(found)
    if outer is not None:
        raise ConfigError(
            f"{found}: a workflow.toml inside the project of {outer} is not used by finding it (a run's "
            f"agent may have written it): remove it, or pass --config {found} if it is yours"
        )
    return found


def lookup(given: str | None, env: Mapping[str, str], cwd: str | None = None) -> str | None:
    """The resolved config a command uses: ``given`` (``--config``), else ``$WORKFLOW_CONFIG``,
    else the one found from ``cwd`` (default the current directory); None: there is none (the
    defaults). ConfigError when the file named does not exist or the one found is refused."""
    given = given or env.get("WORKFLOW_CONFIG") or None
    if given is not None:
        path = os.path.realpath(os.path.expanduser(given))
        if not os.path.isfile(path):
            raise ConfigError(f"{path}: config file not found (expected a workflow.toml)")
        return path
    return find_config(os.path.realpath(cwd if cwd is not None else os.getcwd()))
