"""CLI: the thin click layer — parse arguments, call the library, map errors to exit codes.

``main`` is the ``workflow`` group (its families load on demand); ``notify``, ``run`` and
``agentd`` also give the standalone ``workflow-notify``, ``run-role`` and ``agentd`` scripts.
"""
