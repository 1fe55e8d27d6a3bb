#!/usr/bin/env bash
# Runs roll's test suite (fast tests; pass -m slow for the long ones). Sets up .venv first if needed.
# After a whole-suite run (no test paths given) it runs the tests marked `vllm` in .venv-vllm (vLLM pins its own torch and
# transformers, so it lives in a second environment): in CI (CI=true) it sets that environment up
# (scripts/setup_vllm.sh) while the main pass runs, its output in .venv-vllm-setup.log; elsewhere it runs
# them when .venv-vllm exists. In .venv the `vllm` tests skip with the reason.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/bootstrap.sh"
PY="${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/python}"; PY="${PY:-$ROOT/.venv/bin/python}"
cd "$ROOT"
export RAY_AUTH_MODE=disabled
# The vllm pass follows a whole-suite run (options only, no test paths named).
whole_suite=true
for arg in "$@"; do
  if [ -e "$arg" ] || [[ "$arg" == tests/* ]]; then whole_suite=false; fi
done
# Installing vLLM is mostly download and unpacking: in CI it overlaps the main pass instead of following it.
setup_pid=""
if [ "$whole_suite" = true ] && [ "${CI:-}" = "true" ]; then
  bash "$ROOT/scripts/setup_vllm.sh" > "$ROOT/.venv-vllm-setup.log" 2>&1 &
  setup_pid=$!
fi
status=0
"$PY" -m pytest "$@" || status=$?
if [ "$whole_suite" = false ]; then exit $status; fi
if [ -n "$setup_pid" ]; then
  setup_status=0
  wait "$setup_pid" || setup_status=$?
  cat "$ROOT/.venv-vllm-setup.log"
  if [ "$setup_status" -ne 0 ]; then echo "[test] setting up .venv-vllm failed"; exit 1; fi
fi
if [ -x "$ROOT/.venv-vllm/bin/python" ]; then
  echo "[test] the tests marked vllm, in .venv-vllm"
  "$ROOT/.venv-vllm/bin/python" -m pytest "$@" -m vllm tests/rollout || status=$?
fi
exit $status
