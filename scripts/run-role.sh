#!/usr/bin/env bash
# Seed 002's ./Workflow/scripts/run-role.sh: the same arguments as `run-role`.
#   scripts/run-role.sh --with-email spec-reviewer
#   scripts/run-role.sh -i spec-writing-helper user-auth
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ -x "$root/.venv/bin/python" ]; then
  # -P: the current directory (a project, where an agent may have left a `workflow/`) is never imported from
  exec "$root/.venv/bin/python" -P -c 'from workflow.cli.run import main; main()' "$@"
fi
exec run-role "$@"
