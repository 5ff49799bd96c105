"""Slack bridge: signed events in, classified tasks, runs through run-role, results back."""
