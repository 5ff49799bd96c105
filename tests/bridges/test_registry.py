"""A bridge is one entry (``bridges.sections.BRIDGES``): it carries its config section, the sections
core reads are taken from that tuple, every bridge package's entry is in it, and the registry — read
at every command's start — imports no bridge's machinery."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from workflow.bridges.sections import BRIDGES, SECTIONS

BRIDGES_DIR = Path(__file__).resolve().parents[2] / "workflow" / "bridges"


def test_one_tuple_lists_every_bridge_with_its_section() -> None:
    packages = sorted(p.parent.name for p in BRIDGES_DIR.glob("*/entry.py"))
    assert sorted(b.name for b in BRIDGES) == packages
    assert SECTIONS == tuple(b.section for b in BRIDGES)
    assert [s.name for s in SECTIONS] == [b.name for b in BRIDGES]


def test_the_registry_is_light_to_import() -> None:
    code = (
        "import sys, workflow.bridges.sections\n"
        "heavy = [m for m in ('workflow.bridges.gmail.bridge', 'workflow.bridges.slack.bridge',"
        " 'workflow.bridges.slack.receive', 'slack_sdk', 'imapclient') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr
