#!/usr/bin/env bash
# Runs roll's test suite (fast tests; pass -m slow for the long ones). Sets up .venv first if needed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/bootstrap.sh"
PY="${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/python}"; PY="${PY:-$ROOT/.venv/bin/python}"
cd "$ROOT"
export RAY_AUTH_MODE=disabled
exec "$PY" -m pytest "$@"
