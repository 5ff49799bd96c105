"""Agents: one run of one role — its context, its tools, its backend, its lock."""
