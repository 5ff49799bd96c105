"""The README is a front door and docs/ the manual: the README stays short, every link of both
resolves to a file and a heading that exist, and docs/ARCHITECTURE.md's layout names every folder
of the package."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but ``-`` and ``_`` dropped, spaces as ``-``."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    prose = FENCE.sub("", page.read_text())
    return {slug(h) for h in re.findall(r"^#{1,6} (.+)$", prose, re.M)}


def links(page: Path) -> list[str]:
    return [t for t in LINK.findall(FENCE.sub("", page.read_text())) if not t.startswith(("http://", "https://"))]


def test_the_readme_is_a_front_door() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 300
    for section in ("## Quickstart", "## Concepts", "## Commands", "## Where to read on"):
        assert section in text, section
    for topic in ("Several machines", "Agents", "People", "Bridges", "Security", "Performance"):
        assert f"**{topic}**" in text, topic


def test_every_link_of_the_readme_and_the_docs_resolves() -> None:
    broken = []
    for page in PAGES:
        for target in links(page):
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert len(links(ROOT / "README.md")) > 30 and broken == []


def test_the_slug_is_githubs() -> None:
    assert slug("`workflow init [DIR]` — make a project") == "workflow-init-dir--make-a-project"
    assert slug("From anywhere: IMAP") == "from-anywhere-imap"


def layout() -> dict[str, str]:
    """docs/ARCHITECTURE.md's layout: each top-level entry (``  core/``) and its text."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    block = text.split("## Layout", 1)[1].split("```\n", 2)[1]
    entries: dict[str, str] = {}
    name = ""
    for line in block.splitlines():
        if m := re.match(r"^  (\S+)", line):
            name = m.group(1)
            entries[name] = line
        elif name and line.startswith("   "):
            entries[name] += "\n" + line
        else:
            name = ""
    return entries


def test_the_layout_names_every_folder_of_the_package() -> None:
    entries = layout()
    package = ROOT / "workflow"
    folders = sorted(d.relative_to(package) for d in package.rglob("*") if d.is_dir() and d.name != "__pycache__")
    missing = []
    for folder in folders:
        top = f"{folder.parts[0]}/"
        if top not in entries:
            missing.append(str(folder))
        elif len(folder.parts) > 1 and not re.search(rf"(?<![\w/]){re.escape(folder.name)}/", entries[top]):
            missing.append(str(folder))
    assert len(folders) > 12 and missing == []
    assert "app.py" in entries
