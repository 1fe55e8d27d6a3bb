#!/usr/bin/env bash
# Runs roll's test suite (fast tests; pass -m slow for the long ones). Sets up .venv first if needed.
# After a whole-suite run (no test paths given) it runs the tests marked `vllm` in .venv-vllm (vLLM pins its own torch and
# transformers, so it lives in a second environment): in CI (CI=true) it sets that environment up
# first (scripts/setup_vllm.sh); elsewhere it runs them when .venv-vllm exists. In .venv the `vllm`
# tests skip with the reason.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/bootstrap.sh"
PY="${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/python}"; PY="${PY:-$ROOT/.venv/bin/python}"
cd "$ROOT"
export RAY_AUTH_MODE=disabled
status=0
"$PY" -m pytest "$@" || status=$?
# The vllm pass follows a whole-suite run (options only, no test paths named).
for arg in "$@"; do
  if [ -e "$arg" ] || [[ "$arg" == tests/* ]]; then exit $status; fi
done
if [ "${CI:-}" = "true" ]; then
  bash "$ROOT/scripts/setup_vllm.sh"
fi
if [ -x "$ROOT/.venv-vllm/bin/python" ]; then
  echo "[test] the tests marked vllm, in .venv-vllm"
  "$ROOT/.venv-vllm/bin/python" -m pytest "$@" -m vllm tests/rollout || status=$?
fi
exit $status
