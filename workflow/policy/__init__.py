"""Policy: who may write to whom — roles, the roster of addresses, visibility and guardrails."""
