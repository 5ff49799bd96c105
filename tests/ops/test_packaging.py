"""Packaging: the license, the metadata, the systemd units and shell completion a user installs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from helpers.project import ROOT, Project

NO_SYSTEMD = "systemd-analyze is not installed (scripts/system-packages installs systemd)"


def test_license_and_metadata() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License") and meta["license"] == {"text": "MIT"}
    assert (
        meta["authors"] and meta["urls"]["Homepage"] and "License :: OSI Approved :: MIT License" in meta["classifiers"]
    )


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason=NO_SYSTEMD)
def test_the_systemd_user_units_verify(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    instance = subprocess.run(
        ["systemd-escape", "--path", str(project)], capture_output=True, text=True, check=True
    ).stdout.strip()
    units = tmp_path / "units"
    units.mkdir()
    for template in sorted((ROOT / "contrib" / "systemd").glob("*@.service")):
        shutil.copy(template, units / template.name.replace("@.", f"@{instance}."))
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    files = sorted(str(u) for u in units.iterdir())
    assert [Path(f).name.split("@")[0] for f in files] == ["workflow-agentd", "workflow-smtpd", "workflow-web"]
    r = subprocess.run(["systemd-analyze", "verify", "--user", *files], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and r.stderr.strip() == "", r.stderr
    # The check is real: a unit with a mistake fails it.
    bad = units / "bad.service"
    bad.write_text("[Service]\nExecStart=/nonexistent/workflow\n")
    r = subprocess.run(["systemd-analyze", "verify", "--user", str(bad)], capture_output=True, text=True, env=env)
    assert r.returncode != 0


def _complete(p: Project, words: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}
    env.update(COMP_WORDS=words, COMP_CWORD=str(len(words.split()) - (0 if words.endswith(" ") else 1)))
    env["_WORKFLOW_COMPLETE"] = "bash_complete"
    r = subprocess.run(
        [sys.executable, "-c", "from workflow.cli.main import main; main()"],
        cwd=p.dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    return [line.split(",", 1)[1] for line in r.stdout.splitlines() if "," in line]


def test_completion_offers_this_projects_roles_states_events_and_artifacts(project: Project) -> None:
    assert "spec-reviewer" in _complete(project, "workflow inbox spec-r")
    assert _complete(project, "workflow move user-auth do") == ["doing", "done"]
    assert _complete(project, "workflow inbox user --event rev") == ["review-request"]
    assert "user-auth" in _complete(project, "workflow move user")
    assert "implementer" in _complete(project, "workflow move user-auth todo --as impl")
