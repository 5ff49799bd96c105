#!/usr/bin/env bash
# Seed 002's ./Workflow/scripts/run-role.sh: the same arguments as `run-role`.
#   scripts/run-role.sh --with-email spec-reviewer
#   scripts/run-role.sh -i spec-writing-helper user-auth
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ -x "$root/.venv/bin/python" ]; then
  exec "$root/.venv/bin/python" -c 'from workflow.cli.run import main; main()' "$@"
fi
exec run-role "$@"
