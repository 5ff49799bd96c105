"""The owner's credential on a fresh host: processes that start at the same moment — `workflow smtpd`,
`agentd run`, or any commands making it — all find it whole, never empty or half written."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers.git import GIT_ENV, git_project
from workflow.delivery import owner
from workflow.delivery.credentials import owner_secret

ROUNDS = 20  # a reader between the old code's create and write was met within 20 rounds here
RACERS = 4
STARTS = 20  # the acceptance: smtpd and agentd started together on a fresh HOME, 20 times


def _race(path: str, start: object, out: object) -> None:
    start.wait()  # type: ignore[attr-defined]
    try:
        out.put(owner_secret({"WORKFLOW_CREDENTIALS": path}))  # type: ignore[attr-defined]
    except Exception as e:  # the reproduction: "not an owner credential" from a reader in between
        out.put(f"{type(e).__name__}: {e}")  # type: ignore[attr-defined]


def test_processes_making_the_owner_secret_at_once_all_read_the_one_secret(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    for n in range(ROUNDS):
        path = str(tmp_path / f"round{n}" / "credentials")
        start, out = ctx.Barrier(RACERS), ctx.Queue()
        procs = [ctx.Process(target=_race, args=(path, start, out)) for _ in range(RACERS)]
        for p in procs:
            p.start()
        got = [out.get(timeout=30) for _ in procs]
        for p in procs:
            p.join(30)
        assert len(set(got)) == 1 and owner.fit(got[0]), (n, got)
        assert owner.read(path) == got[0]
        assert os.stat(path).st_mode & 0o777 == 0o600
        assert os.listdir(os.path.dirname(path)) == ["credentials"], "a temporary file was left behind"


def _started(proc: subprocess.Popen[bytes], log: Path, word: bytes) -> bool:
    if proc.poll() is not None:
        raise AssertionError(f"exited {proc.returncode}: {log.read_bytes()[-1500:]!r}")
    return word in log.read_bytes()


def test_smtpd_and_agentd_started_at_once_on_a_fresh_home_both_find_the_credential_whole(tmp_path: Path) -> None:
    """The reproduction: on a fresh host `workflow smtpd` and `agentd run` started together left the
    credential empty and the server exited with "not an owner credential"."""
    p = git_project(tmp_path / "fresh")
    base = {k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_") and k != "XDG_CONFIG_HOME"}
    for n in range(STARTS):
        home = tmp_path / f"home{n}"
        home.mkdir()
        env = {**base, **GIT_ENV, "HOME": str(home)}
        logs = [tmp_path / f"smtpd{n}.log", tmp_path / f"agentd{n}.log"]
        cmds = [["smtpd", "--port", "0", "--workers", "1"], ["agentd", "run"]]
        procs = []
        for cmd, log in zip(cmds, logs, strict=True):
            with open(log, "wb") as f:
                procs.append(
                    subprocess.Popen([sys.executable, "-m", "workflow", *cmd], cwd=p.dir, env=env, stdout=f, stderr=f)
                )
        try:
            end = time.monotonic() + 30
            while not (_started(procs[0], logs[0], b"listening on") and _started(procs[1], logs[1], b"started")):
                assert time.monotonic() < end, [log.read_text() for log in logs]
                time.sleep(0.02)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for proc in procs:
                proc.wait(30)
        assert owner.fit(owner.read(str(home / ".config" / "workflow" / "credentials"))), n
