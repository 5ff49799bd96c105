"""Docs: the shell blocks of a Markdown page, run as pasted — line by line in one bash, each line's output kept."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from helpers.owner import through_files

BLOCK = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)
MARK = "@@line@@"


def blocks(page: Path) -> dict[str, list[str]]:
    """Each section's (## heading's) bash lines, in order; the lines before the first ## heading
    are the section titled "" (none is left out)."""
    out: dict[str, list[str]] = {}
    first, *parts = re.split(r"^## ", page.read_text(), flags=re.M)
    for part in ["\n" + first, *parts]:
        title, _, body = part.partition("\n")
        lines = [line for b in BLOCK.findall(body) for line in _joined(b.splitlines()) if line.strip()]
        if lines:
            out[title.strip()] = lines
    return out


def _joined(lines: list[str]) -> list[str]:
    """Lines as bash reads them: one ending in a backslash goes on with the next."""
    out: list[str] = []
    carry = ""
    for line in lines:
        if line.endswith("\\"):
            carry += line + "\n"
        else:
            out.append(carry + line)
            carry = ""
    return out + ([carry] if carry else [])


def run(
    lines: Sequence[str], cwd: Path, env: dict[str, str], timeout: float = 60, user: Sequence[str] = ()
) -> list[str]:
    """Run ``lines`` in one ``bash -euo pipefail`` (an ``export`` carries on), as ``user`` (a
    ``runuser -u NAME --`` prefix) if given; each line's output. A failing line fails here, naming
    it. Output goes through files, not pipes: a daemon a line starts may keep them open."""
    script = "".join(f"echo {MARK}{i}\n{line}\n" for i, line in enumerate(lines))
    r = through_files([*user, "bash", "-euo", "pipefail", "-c", script], cwd, env, timeout)
    outputs = [p.partition("\n")[2] for p in r.stdout.split(MARK)[1:]]
    if r.returncode != 0:
        failed = lines[len(outputs) - 1] if outputs else lines[0]
        raise AssertionError(f"as pasted, this line fails ({r.returncode}): {failed}\n{r.stderr[-3000:]}")
    return outputs
