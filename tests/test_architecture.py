"""The folder tree is the architecture: layers (import-linter), no import cycles, small documented modules."""

from __future__ import annotations

import ast
import asyncio
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from helpers.tiers import spawning, spawns

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "workflow"
TOOLS = ROOT / "tools"  # the developer's harnesses: held to the same module rules, never imported by the package
MAX_LINES = 600
MAX_TOP_LEVEL = 8


def modules() -> dict[str, Path]:
    out = {}
    for p in sorted([*PACKAGE.rglob("*.py"), *TOOLS.rglob("*.py")]):
        parts = list(p.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = p
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> list[tuple[str, int, bool]]:
    """(imported module, line, inside a function) for every import of a package module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                found.extend((a.name, child.lineno, in_function) for a in child.names if a.name in known)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join(up + ([child.module] if child.module else []))
                for a in child.names:
                    target = f"{base}.{a.name}"
                    if target in known:
                        found.append((target, child.lineno, in_function))
                    elif base in known:
                        found.append((base, child.lineno, in_function))
            visit(child, nested)

    visit(tree, False)
    return [f for f in found if f[0] != name]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in graph:
        if v not in index:
            strong(v)
    return out


def test_zero_import_cycles_counting_every_import() -> None:
    known = modules()
    graph = {name: {t for t, _, _ in imports(name, path, known)} for name, path in known.items()}
    # a package's __init__ importing its own submodules is how a package exposes them, not a cycle
    for name in graph:
        graph[name] = {t for t in graph[name] if not t.startswith(name + ".")}
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_layers_hold(tmp_path: Path) -> None:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("lint-imports is not installed (pip install -e '.[dev]' installs it)")
    r = subprocess.run([exe], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 broken" in r.stdout


def test_the_package_never_imports_the_tools() -> None:
    """tools/ (chaos harness, corpus generator) is not installed: the product must not need it."""
    known = modules()
    used = [
        f"{path.relative_to(ROOT)}:{line} imports {target}"
        for name, path in known.items()
        if name.startswith("workflow")
        for target, line, _ in imports(name, path, known)
        if target.startswith("tools")
    ]
    assert used == []
    assert not list(PACKAGE.rglob("chaos*.py")) and (TOOLS / "chaos_agent.py").is_file()


def test_the_tree_reads_as_the_architecture() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL, top
    packages = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
    assert packages == [
        "agentd",
        "agents",
        "artifacts",
        "bridges",
        "cli",
        "core",
        "delivery",
        "mail",
        "ops",
        "panels",
        "policy",
        "web",
    ]


@pytest.mark.parametrize("name", sorted(modules()))
def test_every_module_is_small_and_says_its_job(name: str) -> None:
    path = modules()[name]
    text = path.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_LINES, f"{path}: split it"
    doc = ast.get_docstring(ast.parse(text))
    assert doc and doc.strip(), f"{path}: no module docstring"
    assert "TODO" not in doc.splitlines()[0]


def test_function_level_imports_say_why() -> None:
    """A function-level import of anything is allowed only to save start-up time, and says so."""
    bad = []
    for path in sorted([*PACKAGE.rglob("*.py"), *TOOLS.rglob("*.py")]):
        lines = path.read_text(encoding="utf-8").splitlines()
        tree = ast.parse("\n".join(lines))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    here = lines[node.lineno - 1]
                    above = lines[node.lineno - 2] if node.lineno > 1 else ""
                    group_head = next(
                        (lines[i] for i in range(node.lineno - 2, max(node.lineno - 5, 0), -1) if "# lazy" in lines[i]),
                        "",
                    )
                    if "# lazy" not in here and "# lazy" not in above and not group_head:
                        bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {here.strip()}")
    assert bad == []


def test_no_comment_points_outside_the_repository() -> None:
    """The design documents the code cites live in docs/, not in a seed outside the repository."""
    cite = re.compile(r"\b[Ss]eeds?(?:'s| \d{3}| asks| says|/)|\.\./shared")
    hits = [
        f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
        for p in sorted(PACKAGE.rglob("*.py"))
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if cite.search(line)
    ]
    assert hits == []
    for doc in (
        "docs/ARCHITECTURE.md",
        "docs/message-format.md",
        "docs/roles-and-panels.md",
        "docs/agentd.md",
        "docs/bridges.md",
    ):
        assert (ROOT / doc).is_file(), doc
    cited = {m for p in PACKAGE.rglob("*.py") for m in re.findall(r"docs/[\w-]+\.md", p.read_text(encoding="utf-8"))}
    assert cited and all((ROOT / doc).is_file() for doc in cited), sorted(cited)


def test_tests_mirror_the_package_and_share_only_helpers() -> None:
    tests = ROOT / "tests"
    folders = sorted(p.name for p in tests.iterdir() if p.is_dir() and p.name not in ("helpers", "__pycache__"))
    packages = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
    assert set(folders) <= set(packages), folders
    for p in tests.rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.split(".")[0].startswith(("test_", "conftest")), f"{p}: imports {node.module}"


def test_the_delivery_path_contract_names_every_module_of_the_path() -> None:
    """A module added beside ``deliverer`` is held to "the path does not import the server" too."""
    import tomllib  # lazy: only this test reads the contracts

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    path = next(c for c in contracts if c.get("forbidden_modules") == ["workflow.delivery.server"])
    on_disk = {f"workflow.delivery.{p.stem}" for p in (PACKAGE / "delivery").glob("*.py") if p.stem != "__init__"}
    assert set(path["source_modules"]) == on_disk


def _starts_one() -> None:
    subprocess.run(["true"], check=True)


@spawning
def _marked_helper() -> None: ...


def _uses_marked_helper() -> None:
    _marked_helper()


@contextmanager
def _wrapped() -> Iterator[None]:
    _starts_one()
    yield


def _uses_wrapped() -> None:
    with _wrapped():
        pass


def _uses_a_marked_method(project: Any) -> None:
    project.run("status")


def _in_process() -> int:
    async def one() -> int:
        return 1

    return asyncio.run(one())


def test_the_tiers_find_what_starts_a_process() -> None:
    """``helpers.tiers``: a marked helper, a marked method, a stdlib starter (followed through a
    helper and a ``@contextmanager``) make a test slow; ``asyncio.run`` and plain code do not."""
    methods = frozenset({"run"})  # ``Project.run`` is marked
    for fn in (_marked_helper, _uses_marked_helper, _starts_one, _uses_wrapped, _uses_a_marked_method):
        assert spawns(fn, methods), fn.__name__
    assert not spawns(_in_process, methods)
    assert not spawns(test_the_cycle_finder_finds_a_cycle, methods)
