"""A non-root owner: a user made with useradd, with a venv of /usr/bin/python3 that runs this
checkout's `workflow`, and a runner for shell lines as that user (Debian's PATH, no sbin)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from helpers.project import ROOT
from helpers.tiers import spawning

SYSTEM_PYTHON = Path("/usr/bin/python3")
RUNUSER = shutil.which("runuser") or "runuser"  # in /usr/sbin: found on root's PATH, not the owner's


def unavailable() -> str | None:
    """None when a non-root owner can be made here, else why not."""
    if os.geteuid() != 0:
        return "making another user needs root"
    for tool in ("useradd", "userdel", "runuser"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if not SYSTEM_PYTHON.exists():
        return f"{SYSTEM_PYTHON} is not installed (the owner's venv is made from it)"
    version = subprocess.run(
        [str(SYSTEM_PYTHON), "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True
    ).stdout.strip()
    if version != str(sys.version_info[:2]):
        return (
            f"{SYSTEM_PYTHON} is Python {version}, not the tests' {sys.version_info[:2]}: it cannot load their packages"
        )
    return None


@spawning
def through_files(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` with its output through files, not pipes: a daemon it starts may keep a pipe
    open, and the run would never end."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        r = subprocess.run(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err, text=True, timeout=timeout
        )
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(r.args, r.returncode, out.read(), err.read())


@dataclass
class Owner:
    name: str
    home: Path
    venv: Path

    def env(self) -> dict[str, str]:
        return {
            "HOME": str(self.home),
            "USER": self.name,
            "LOGNAME": self.name,
            "PATH": f"{self.venv}/bin:/usr/local/bin:/usr/bin:/bin",  # Debian's PATH for a user: no sbin
            "LANG": "C.UTF-8",
        }

    def sh(self, line: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run a shell line as pasted by this user in ``cwd``. Its output goes through a file, not
        a pipe: a daemon it starts may keep its stdout open."""
        return through_files([RUNUSER, "-u", self.name, "--", "sh", "-c", line], cwd, self.env(), timeout)

    def popen(self, line: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [RUNUSER, "-u", self.name, "--", "sh", "-c", f"exec {line}"],
            cwd=cwd,
            env=env if env is not None else self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def stop(self, proc: subprocess.Popen[str]) -> str:
        """SIGTERM to what ``popen`` started (runuser's child, not runuser: it would wait 2 s
        before killing it); its output."""
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
        for pid in children.read_text().split() if children.exists() else ():
            os.kill(int(pid), signal.SIGTERM)
        return proc.communicate(timeout=20)[0]

    def own(self, *paths: Path) -> None:
        for p in paths:
            subprocess.run(["chown", "-R", f"{self.name}:{self.name}", str(p)], check=True)


@spawning
@contextmanager
def owner(base: Path) -> Iterator[Owner]:
    """A user whose home is ``base/home`` (``base`` must be open to it) and its venv: a venv of
    /usr/bin/python3 whose site reads this checkout's packages (no download, a fraction of a second)."""
    name = f"wfown{os.getpid()}"
    home = base / "home"
    subprocess.run(["useradd", "-m", "-d", str(home), "-s", "/bin/sh", "-U", name], check=True, capture_output=True)
    try:
        venv = base / "venv"
        subprocess.run([str(SYSTEM_PYTHON), "-m", "venv", "--without-pip", str(venv)], check=True)
        site = venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
        ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
        (site / "checkout.pth").write_text(
            "".join(f"import site; site.addsitedir({p!r})\n" for p in sorted(ours)) + f"{ROOT}\n"
        )
        (venv / "bin" / "workflow").write_text(
            f"#!{venv}/bin/python\nimport sys\nfrom workflow.cli.entry import workflow\nsys.exit(workflow())\n"
        )
        os.chmod(venv / "bin" / "workflow", 0o755)
        yield Owner(name, home, venv)
    finally:
        subprocess.run(["userdel", "--force", name], check=False, capture_output=True)
