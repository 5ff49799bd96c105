#!/usr/bin/env bash
# workflow-notify as seed 002 calls it: ./Workflow/scripts/workflow-notify.sh EVENT ARTIFACT TO [KEY=VALUE...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ -x "$root/.venv/bin/workflow-notify" ]; then exec "$root/.venv/bin/workflow-notify" "$@"; fi
if command -v workflow-notify >/dev/null 2>&1; then exec workflow-notify "$@"; fi
PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" exec python3 -c 'from workflow.cli.entry import notify; notify()' "$@"
