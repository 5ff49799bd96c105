"""Tiers: which tests are ``slow`` — they start processes (a fresh interpreter, a server, Dovecot, a mail client).

``scripts/test --fast`` deselects them (``-m "not slow"``) for the edit-test loop; CI runs every
test. What starts a process says so:

- a helper or fixture that starts one is marked ``@spawning`` (``helpers.smtp.server_process``,
  ``helpers.dovecot.Dovecot``, ``Project.run`` …): a test that uses the fixture, or names the
  helper, is slow;
- a test (or a function of the suite it calls, followed) that starts one itself names the standard
  library's way to: ``subprocess``, ``Popen``, ``sys.executable``, ``os.fork``/``posix_spawn``/
  ``system``/``exec*``, ``multiprocessing`` — read from its compiled names, never from its text;
- anything else slow is marked ``@pytest.mark.slow`` by hand (so is a test that calls both
  ``asyncio.run`` and a marked ``run`` method: the names alone cannot tell the two apart).

Git commands through the package (``run_git``) are not counted: they take milliseconds.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Iterable
from types import CodeType, FunctionType
from typing import Any, TypeVar

import pytest

T = TypeVar("T")
MARK = "__spawning__"
STARTERS = frozenset({"subprocess", "Popen", "posix_spawn", "posix_spawnp", "multiprocessing", "fork", "forkpty"})
OS_STARTERS = frozenset({"system", "execv", "execve", "execvp", "execvpe", "execl", "execlp", "spawnv", "executable"})


def spawning(thing: T) -> T:
    """Mark a helper, a fixture's function, a class or a method as one that starts a process."""
    setattr(thing, MARK, True)
    return thing


def _marked(obj: Any) -> bool:
    return bool(getattr(obj, MARK, False)) or bool(getattr(getattr(obj, "__wrapped__", None), MARK, False))


def _methods() -> frozenset[str]:
    """The names of the suite's methods marked ``@spawning`` (``project.run(…)`` names ``run``)."""
    out = set()
    for name, module in list(sys.modules.items()):
        if not name.startswith("helpers"):
            continue
        for cls in vars(module).values():
            if isinstance(cls, type) and cls.__module__ == name:
                out |= {n for n, f in vars(cls).items() if _marked(f)}
    return frozenset(out)


def _names(code: CodeType) -> set[str]:
    """The global and attribute names a function uses, with those of the functions and lambdas nested in it."""
    out = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, CodeType):
            out |= _names(const)
    return out


def _starts(names: set[str], methods: frozenset[str]) -> bool:
    """Whether these names call the standard library's process starters or a marked method."""
    if names & STARTERS or ("os" in names or "sys" in names) and names & OS_STARTERS:
        return True
    used = names & methods
    return bool(used) and not (used == {"run"} and "asyncio" in names)  # asyncio.run: not Project.run


def spawns(fn: Callable[..., Any], methods: frozenset[str], seen: set[int] | None = None) -> bool:
    """Whether ``fn`` — or a function of the suite it names, followed — starts a process."""
    seen = set() if seen is None else seen
    fn = getattr(getattr(fn, "hypothesis", None), "inner_test", fn)  # a hypothesis test: the function it wraps
    if _marked(fn):
        return True
    fn = inspect.unwrap(fn)  # a @contextmanager helper: the generator it wraps
    if id(fn) in seen:
        return False
    seen.add(id(fn))
    if _marked(fn):
        return True
    code = getattr(fn, "__code__", None)
    if not isinstance(code, CodeType):
        return False
    names = _names(code)
    if _starts(names, methods):
        return True
    found = getattr(fn, "__globals__", {})
    for name in names:
        other = found.get(name)
        if _marked(other):
            return True
        if isinstance(other, FunctionType) and _ours(other) and spawns(other, methods, seen):
            return True
    return False


def _ours(fn: FunctionType) -> bool:
    """Functions of the test suite (test modules, conftest, helpers) and of tools/, not of the package or libraries."""
    module = fn.__module__ or ""
    return (
        module.startswith(("test_", "conftest", "helpers", "tools"))
        or ".test_" in module
        or module.endswith("conftest")
    )


def _fixtures(item: pytest.Function) -> Iterable[Any]:
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs if info is not None else {}
    return (d[-1].func for name, d in defs.items() if d and name in item.fixturenames)


def mark(items: list[pytest.Item]) -> None:
    """Add ``slow`` to every collected test that spawns a process (unless already marked)."""
    methods = _methods()
    for item in items:
        if item.get_closest_marker("slow") or not isinstance(item, pytest.Function):
            continue
        seen: set[int] = set()
        fixtures = list(_fixtures(item))
        if any(_marked(f) for f in fixtures):
            item.add_marker(pytest.mark.slow)
            continue
        funcs = [item.function, *(f for f in fixtures if isinstance(f, FunctionType) and _ours(f))]
        if any(spawns(f, methods, seen) for f in funcs):
            item.add_marker(pytest.mark.slow)
