"""Todos: the inbox agent's lightweight intents — add, list and complete on a local todo list, no run.

``todo`` adds the text after its prefix (todo:, add todo, todo追加…); ``todo_check`` lists the open
todos; ``todo_complete`` closes the numbered one. Each returns the answer for the thread and the
reaction that marks the task (memo for an added todo, white_check_mark otherwise).
"""

from __future__ import annotations

import re

from workflow.bridges.slack.store import SlackStore

TODO_PREFIXES = ("todo:", "add todo", "add to my todo", "todo追加", "todoに追加")
TODO_INTENTS = ("todo", "todo_check", "todo_complete")


def handle(store: SlackStore, intent: str, text: str) -> tuple[str, str]:
    """(answer, reaction) for one todo-intent request."""
    if intent == "todo":
        item = text
        for prefix in TODO_PREFIXES:
            i = item.lower().find(prefix)
            if i >= 0:
                item = item[i + len(prefix) :]
        item = item.strip(" :：") or text
        store.add_todo(item)
        return f"Added to the todo list: {item}", "memo"
    if intent == "todo_check":
        rows = store.open_todos()
        return "Todo:\n" + ("\n".join(f"{i}. {x}" for i, x in rows) or "(empty)"), "white_check_mark"
    m = re.search(r"(\d+)", text)
    if not m:
        return "Which todo? Give its number (todo一覧 / list todos shows them).", "white_check_mark"
    done = store.complete_todo(int(m.group(1)))
    return (f"Done: todo {m.group(1)}" if done else f"No open todo {m.group(1)}"), "white_check_mark"
