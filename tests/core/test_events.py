"""The event-type registry: each event type once, with its template and docs, and no reader
keeping a table of event types of its own."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from workflow.cli.styled import ANSI
from workflow.core import events
from workflow.core.config import DEFAULT_EVENTS, DEFAULT_STATES
from workflow.core.resources import builtin_dir

ROOT = Path(__file__).resolve().parents[2]


def test_names_are_unique_and_the_default_event_types() -> None:
    assert len(set(events.NAMES)) == len(events.NAMES) == len(events.EVENTS)
    assert DEFAULT_EVENTS == events.NAMES


@pytest.mark.parametrize("event", events.EVENTS, ids=events.NAMES)
def test_each_event_type_has_its_template_docs_and_known_parts(event: events.EventType) -> None:
    template = builtin_dir("email-templates") / f"{event.name}.txt"
    assert template.is_file(), f"write {template}"
    assert event.reason in template.read_text(), f"{template} never uses {event.reason}, which a move's reason fills"
    assert f"| {event.name}.txt |" in (ROOT / "email-templates" / "README.md").read_text()
    assert set(event.rules) <= set(events.RULES), event.rules
    assert all(word in ANSI for word in event.style.split()), event.style
    for state in (*(event.decision or ()), *([event.enters] if event.enters != events.ANY else [])):
        assert state is None or state in DEFAULT_STATES


def test_a_move_notifies_with_the_event_the_registry_names() -> None:
    assert events.on_move("proposed", "todo") == "approval"
    assert events.on_move("proposed", "proposed") == "rejection"
    assert events.on_move("doing", "blocked") == "blocker-report"
    assert events.on_move("todo", "doing") == "status-update"
    assert events.get("my-own").priority == max(e.priority for e in events.EVENTS) + 1  # a project's own: last


def _tables(tree: ast.AST) -> list[int]:
    """Lines of literals that key a dict by event type or list three or more of them."""
    names = set(events.NAMES)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            if keys & names:
                out.append(node.lineno)
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            found = {e.value for e in node.elts if isinstance(e, ast.Constant)}
            if len(found & names) >= 3:
                out.append(node.lineno)
    return out


def test_no_module_keeps_a_table_of_event_types_but_the_registry() -> None:
    skip = {
        ROOT / "workflow" / "core" / "events.py",  # the registry
        ROOT / "workflow" / "ops" / "corpus.py",  # a benchmark corpus's mix of mail, not a rule (issue 37: moves out)
    }
    found = {
        str(f.relative_to(ROOT)): lines
        for f in sorted((ROOT / "workflow").rglob("*.py"))
        if f not in skip and (lines := _tables(ast.parse(f.read_text())))
    }
    assert found == {}, f"tables keyed by event type outside workflow/core/events.py: {found}"
    assert _tables(ast.parse('PRIORITY = {"approval": 2}')) == [1]  # the check sees one
