"""Issue 49: a run's transcript read in each backend's own shape — Codex's rollout, Gemini CLI's
chat, the API backend's turns (Claude Code's, from the real CLI: test_web_runpage.py)."""

from __future__ import annotations

import json

from workflow.web.transcripts import steps


def _lines(*records: object) -> str:
    return "\n".join(json.dumps(r) for r in records) + "\n"


def test_codex_rollout_gives_the_text_the_calls_and_the_move() -> None:
    rollout = _lines(
        {"type": "session_meta", "payload": {"id": "s1"}},
        {
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "<environment_context>x"}],
            },
        },
        {
            "type": "response_item",
            "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Review it"}]},
        },
        {
            "type": "response_item",
            "payload": {
                "type": "function_call",
                "name": "shell",
                "arguments": json.dumps({"command": ["workflow", "move", "x", "todo"]}),
            },
        },
        {"type": "response_item", "payload": {"type": "function_call_output", "output": "moved"}},
        {
            "type": "response_item",
            "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]},
        },
    )
    got = [(s.kind, s.tag) for s in steps(rollout)]
    assert got == [("user", ""), ("call", ""), ("result", ""), ("text", "")], steps(rollout)
    mcp = _lines(
        {
            "type": "response_item",
            "payload": {
                "type": "function_call",
                "name": "workflow__move_artifact",
                "arguments": '{"artifact": "specs/a.md"}',
            },
        }
    )
    (call,) = steps(mcp)
    assert call.tag == "move" and call.text == "workflow__move_artifact(artifact=specs/a.md)"


def test_gemini_chat_counts_a_message_written_again_once() -> None:
    first = {"id": "m1", "type": "gemini", "content": "Approving.", "toolCalls": []}
    again = {
        **first,
        "toolCalls": [{"name": "send_message", "args": {"event": "approval"}, "result": [{"text": "sent"}]}],
    }
    chat = _lines({"id": "u1", "type": "user", "content": "please review"}, first, again)
    got = [(s.kind, s.tag, s.text) for s in steps(chat)]
    assert got[0] == ("user", "", "please review")
    assert got[1] == ("text", "", "Approving.")
    assert got[2] == ("call", "mail", "send_message(event=approval)")
    assert len(got) == 4 and got[3][0] == "result"
    assert steps(json.dumps({"messages": [again]})) == steps(_lines(again))  # one document, or lines


def test_api_backend_turns_and_hostile_text_stay_text() -> None:
    turns = json.dumps(
        [
            {"role": "user", "content": "<script>alert(1)</script>"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "ok"},
                    {"type": "tool_use", "name": "finish", "input": {"status": "done"}},
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "content": [{"type": "text", "text": "finished"}]}]},
        ]
    )
    got = [(s.kind, s.text) for s in steps(turns)]
    assert got == [
        ("user", "<script>alert(1)</script>"),
        ("text", "ok"),
        ("call", "finish(status=done)"),
        ("result", "finished"),
    ]
    assert steps("not json at all\n{broken") == []
