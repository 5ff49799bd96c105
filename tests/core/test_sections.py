"""Sections: each workflow.toml section is declared once — a key validation accepts is a field of
its record and the reverse — and a key that is not a field is refused at load, not later."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_slack_escalate_to_is_refused_at_load_by_the_real_cli(tmp_path: Path) -> None:
    """Once accepted by the validator and then a ``TypeError`` building ``SlackConfig``: now a
    config error naming the key and the keys allowed, and no traceback."""
    (tmp_path / "workflow.toml").write_text('[bridges.slack]\nescalate_to = "coordinator"\n')
    env = {**os.environ, "WORKFLOW_MAIL_ROOT": str(tmp_path / "mail")}
    p = subprocess.run(
        [sys.executable, "-m", "workflow", "status"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert p.returncode != 0
    assert "Traceback" not in p.stderr and "TypeError" not in p.stderr, p.stderr
    assert f"{tmp_path / 'workflow.toml'}: [bridges.slack] escalate_to: unknown key" in p.stderr, p.stderr
    assert "default_role" in p.stderr and "max_concurrent" in p.stderr  # the keys it does take
