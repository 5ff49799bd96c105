"""Tiers: which tests are ``slow`` — they start processes (a fresh interpreter, a server, Dovecot, a mail client).

``scripts/test --fast`` deselects them (``-m "not slow"``) for the edit-test loop; CI runs every
test. Marking by hand would mean decorating hundreds of tests, so the marker is derived when the
suite is collected: a test is slow when its code, a fixture it uses, or a function it calls (followed
through the functions those call, in the test module, ``helpers`` and ``tools``) spawns a process — calls
``subprocess``, ``sys.executable``, ``Popen``, the ``server_process``/``serving`` helpers, Dovecot,
or ``X.run(…)`` (``Project.run`` starts ``python -m workflow``). A test the rule misses that is
slow anyway is marked ``@pytest.mark.slow`` by hand. Git commands (``run_git``) are not counted:
they take milliseconds.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from types import CodeType, FunctionType
from typing import Any

import pytest

SPAWNS = re.compile(
    r"\bsubprocess\.|\bsys\.executable\b|\bPopen\b|\bserver_process\(|\bserving\(|\b[Dd]ovecot\b|"
    r"\bos\.(?:fork|posix_spawn|system|exec\w*)\(|\bmultiprocessing\b|\b(?!asyncio\.)\w+\.run\("
)


def _source(fn: Callable[..., Any]) -> str:
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return ""


def spawns(fn: Callable[..., Any], seen: set[int] | None = None) -> bool:
    """Whether ``fn`` — or a test-side function it names, followed — starts a process."""
    seen = set() if seen is None else seen
    fn = getattr(getattr(fn, "hypothesis", None), "inner_test", fn)  # a hypothesis test: the function it wraps
    if id(fn) in seen:
        return False
    seen.add(id(fn))
    text = _source(fn)
    if SPAWNS.search(text):
        return True
    code = getattr(fn, "__code__", None)
    names = _names(code) if isinstance(code, CodeType) else set()
    found = getattr(fn, "__globals__", {})
    for name in names:
        other = found.get(name)
        if isinstance(other, FunctionType) and _ours(other) and spawns(other, seen):
            return True
    return False


def _names(code: CodeType) -> set[str]:
    """The global names a function uses, with those of the functions and lambdas nested in it."""
    out = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, CodeType):
            out |= _names(const)
    return out


def _ours(fn: FunctionType) -> bool:
    """Functions of the test suite (test modules, conftest, helpers) and of tools/, not of the package or libraries."""
    module = fn.__module__ or ""
    return (
        module.startswith(("test_", "conftest", "helpers", "tools"))
        or ".test_" in module
        or module.endswith("conftest")
    )


def mark(items: list[pytest.Item]) -> None:
    """Add ``slow`` to every collected test that spawns a process (unless already marked)."""
    for item in items:
        if item.get_closest_marker("slow") or not isinstance(item, pytest.Function):
            continue
        seen: set[int] = set()
        fixtures = getattr(item, "_fixtureinfo", None)
        defs = fixtures.name2fixturedefs if fixtures is not None else {}
        used = (d[-1].func for name, d in defs.items() if d and name in item.fixturenames)
        funcs = [item.function, *(f for f in used if isinstance(f, FunctionType) and _ours(f))]
        if any(spawns(f, seen) for f in funcs):
            item.add_marker(pytest.mark.slow)
