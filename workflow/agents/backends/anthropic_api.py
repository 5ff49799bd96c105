"""Anthropic backend: the Messages API with tool use, looping until the model ends its turn.

Model: the role's front matter ``model``, else ``[backends.anthropic] model``. The loop stops at
``finish`` or ``end_turn`` (a run still keeps nothing without finish: ``runrole.settled``) or
after ``max_turns`` model calls (the role's ``max_turns``, else the config's,
else 20). Mail that arrives during the run is added before the next model turn. Token usage
is summed into the result for budgets. ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL are honoured
(the SDK reads them). Every API failure — 401, 429 (after the SDK's retries, which honour
retry-after), 5xx, timeouts, connection errors — becomes a failed result naming it, never an
exception: the run fails, its mail stays unread, and nothing is lost.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from workflow.agents.backends.base import RunInput, RunResult
from workflow.core.config import AnthropicConfig
from workflow.core.errors import ToolError


class AnthropicBackend:
    acts = "tools"  # we call its tools for it

    def __init__(self, opts: AnthropicConfig) -> None:
        self.model = opts.model
        self.max_tokens = opts.max_tokens
        self.max_turns = opts.max_turns
        self.timeout = opts.timeout
        self.max_retries = opts.max_retries

    def run(self, job: RunInput) -> RunResult:
        import anthropic  # lazy: start-up time (the SDK costs about a second to import)

        if not (os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")):
            return RunResult(
                False, "", "ANTHROPIC_API_KEY is not set (use --backend scripted or command to run without it)"
            )
        client = anthropic.Anthropic(timeout=self.timeout, max_retries=self.max_retries)
        if job.deadline is not None:  # a request never outlasts the run's own timeout
            client = client.with_options(timeout=max(0.1, min(self.timeout, job.deadline - time.monotonic())))
        model = job.model or self.model
        max_turns = job.role.max_turns or job.max_turns or self.max_turns
        messages: list[dict[str, Any]] = [{"role": "user", "content": job.prompt}]
        usage = {"input_tokens": 0, "output_tokens": 0}
        texts: list[str] = []
        for turn in range(1, max_turns + 1):
            if job.deadline is not None and time.monotonic() >= job.deadline:
                return RunResult(False, "\n".join(texts), "the run's time is up", usage, turn - 1)
            try:
                resp = client.messages.create(
                    model=model,
                    max_tokens=self.max_tokens,
                    messages=messages,  # type: ignore[arg-type]
                    tools=job.tools.schemas(),  # type: ignore[arg-type]
                    system=f"You are the {job.role.name} role of a workflow-mail project. Use the tools to act.",
                )
            except anthropic.APIStatusError as e:
                return RunResult(False, "\n".join(texts), _status_error(e), usage, turn - 1)
            except anthropic.APITimeoutError:
                return RunResult(
                    False, "\n".join(texts), f"Anthropic API timed out after {self.timeout:.0f}s", usage, turn - 1
                )
            except anthropic.APIConnectionError as e:
                return RunResult(False, "\n".join(texts), f"cannot reach the Anthropic API: {e}", usage, turn - 1)
            u = getattr(resp, "usage", None)
            usage["input_tokens"] += int(getattr(u, "input_tokens", 0) or 0)
            usage["output_tokens"] += int(getattr(u, "output_tokens", 0) or 0)
            assistant: list[dict[str, Any]] = []
            results: list[dict[str, Any]] = []
            for block in resp.content:
                if block.type == "text":
                    assistant.append({"type": "text", "text": block.text})
                    texts.append(block.text)
                elif block.type == "tool_use":
                    assistant.append({"type": "tool_use", "id": block.id, "name": block.name, "input": block.input})
                    results.append(self._call(job, block.id, block.name, block.input))
            messages.append({"role": "assistant", "content": assistant})
            if job.tools.finished is not None:  # it called finish: its run ends here
                return RunResult(True, "\n".join(texts).strip() or "done", "", usage, turn)
            if resp.stop_reason != "tool_use" or not results:
                return RunResult(True, "\n".join(texts).strip() or "done", "", usage, turn)
            content: list[dict[str, Any]] = list(results)
            for text in job.poll():
                content.append({"type": "text", "text": f"New mail arrived during your run:\n\n{text}"})
            messages.append({"role": "user", "content": content})
        return RunResult(
            False,
            "\n".join(texts),
            f"stopped after max_turns={max_turns} model turns without finishing",
            usage,
            max_turns,
        )

    @staticmethod
    def _call(job: RunInput, tool_id: str, name: str, args: Any) -> dict[str, Any]:
        try:
            if not isinstance(args, dict):
                raise ToolError(f"{name}: arguments must be an object, got {json.dumps(args)[:200]}")
            out = job.tools.call(name, args)
            return {"type": "tool_result", "tool_use_id": tool_id, "content": out}
        except ToolError as e:
            return {"type": "tool_result", "tool_use_id": tool_id, "content": f"refused: {e}", "is_error": True}


def _status_error(e: Any) -> str:
    code = getattr(e, "status_code", "?")
    headers = getattr(getattr(e, "response", None), "headers", {}) or {}
    retry = headers.get("retry-after")
    names = {
        401: "authentication failed (check ANTHROPIC_API_KEY)",
        403: "permission denied",
        429: "rate limited",
        529: "overloaded",
    }
    what = (
        names.get(code, "server error" if isinstance(code, int) and code >= 500 else "request refused")
        if isinstance(code, int)
        else "error"
    )
    detail = str(getattr(e, "message", "") or e)[:300]
    return f"Anthropic API {code}: {what}" + (f"; retry after {retry}s" if retry else "") + f" ({detail})"
