"""CLI: the thin click layer — parse, call the library, map errors to exit codes."""
