"""Entry: where the ``workflow`` command starts — a short reading command on the fast path
(``cli.fast``: no click, no configuration loaded), anything else in the full click CLI
(``cli.main``), which is imported only then."""

from __future__ import annotations

import os
import sys

from workflow.cli.fast import run


def workflow() -> None:
    try:
        code = run(sys.argv[1:], os.environ)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        code = 130
    if code is None:
        from workflow.cli.main import main  # lazy: the full CLI, when the fast path cannot answer

        main()
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(code)  # as cli.base.run_script: nothing left to tear down
