"""Complete: one prompt, one answer from the model API — the backend seam's small call.

The bridges' classifiers ask the model one question each (which intent, which label); they do it
here, not through an SDK of their own, so the same key, base URL and failure handling apply, and
the tokens each answer cost come back for the budgets (``Completion.usage``). ``complete`` raises
``CompletionError`` naming why there is no answer (no key, an API failure); the caller falls back.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

from workflow.core.errors import WorkflowError


class CompletionError(WorkflowError):
    """No answer from the model (no API key, or the call failed)."""


class Completion(NamedTuple):
    text: str
    usage: Mapping[str, int] = MappingProxyType({})  # input_tokens, output_tokens


def complete(prompt: str, model: str, max_tokens: int, timeout: float) -> Completion:
    """The model's answer to ``prompt`` (ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL honoured)."""
    if not (os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")):
        raise CompletionError("no ANTHROPIC_API_KEY")
    import anthropic  # lazy: start-up time (the SDK costs about a second); keyword fallbacks need none

    try:
        resp = anthropic.Anthropic(timeout=timeout, max_retries=1).messages.create(
            model=model, max_tokens=max_tokens, messages=[{"role": "user", "content": prompt}]
        )
    except anthropic.APIError as e:
        raise CompletionError(f"Claude failed: {str(e)[:120]}") from None
    text = "".join(b.text for b in resp.content if b.type == "text")
    used = getattr(resp, "usage", None)
    usage = {
        "input_tokens": int(getattr(used, "input_tokens", 0) or 0),
        "output_tokens": int(getattr(used, "output_tokens", 0) or 0),
    }
    return Completion(text, MappingProxyType(usage))
