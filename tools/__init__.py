"""Tools: the developer's harnesses, not product — the chaos fault harness and the benchmark corpus generator.

Not installed with the package (the wheel ships ``workflow/`` only). ``scripts/bench/*`` put the
repository root on ``sys.path``; pytest does so through ``pythonpath`` in pyproject.toml. Nothing
in ``workflow/`` imports from here (tests/test_architecture.py checks it).
"""
