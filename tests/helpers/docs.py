"""Docs: the shell blocks of a Markdown page, run as pasted — line by line in one bash, each line's output kept."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

BLOCK = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)
MARK = "@@line@@"


def blocks(page: Path) -> dict[str, list[str]]:
    """Each section's (## heading's) bash lines, in order."""
    out: dict[str, list[str]] = {}
    for part in re.split(r"^## ", page.read_text(), flags=re.M)[1:]:
        title, _, body = part.partition("\n")
        lines = [line for b in BLOCK.findall(body) for line in b.splitlines() if line.strip()]
        if lines:
            out[title.strip()] = lines
    return out


def run(
    lines: Sequence[str], cwd: Path, env: dict[str, str], timeout: float = 60, user: Sequence[str] = ()
) -> list[str]:
    """Run ``lines`` in one ``bash -euo pipefail`` (an ``export`` carries on), as ``user`` (a
    ``runuser -u NAME --`` prefix) if given; each line's output. A failing line fails here, naming
    it. Output goes through files, not pipes: a daemon a line starts may keep them open."""
    script = "".join(f"echo {MARK}{i}\n{line}\n" for i, line in enumerate(lines))
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        r = subprocess.run(
            [*user, "bash", "-euo", "pipefail", "-c", script],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            text=True,
            timeout=timeout,
        )
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    outputs = [p.partition("\n")[2] for p in stdout.split(MARK)[1:]]
    if r.returncode != 0:
        failed = lines[len(outputs) - 1] if outputs else lines[0]
        raise AssertionError(f"as pasted, this line fails ({r.returncode}): {failed}\n{stderr[-3000:]}")
    return outputs


def shell_env(home: Path, bin_dir: str) -> dict[str, str]:
    """A person's shell: their HOME, our commands and the system's on PATH, nothing of the test run's."""
    keep = {k: v for k, v in os.environ.items() if k in ("LANG", "LC_ALL", "TERM", "TMPDIR")}
    return {**keep, "HOME": str(home), "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin", "USER": home.name}
