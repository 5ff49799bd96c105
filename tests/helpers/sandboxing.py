"""Sandboxing: whether a real bubblewrap sandbox can run here, for the tests that need one."""

from __future__ import annotations

import shutil

import pytest

from workflow.agents.sandbox import status
from workflow.core.config import load_config

SANDBOXED = shutil.which("bwrap") is not None and status(load_config(None, env={})).enforced
needs_bwrap = pytest.mark.skipif(
    not SANDBOXED, reason="bubblewrap is missing or cannot make namespaces here (scripts/system-packages installs it)"
)
