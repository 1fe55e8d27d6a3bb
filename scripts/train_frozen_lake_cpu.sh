#!/usr/bin/env bash
# The main job: a short FrozenLake GRPO run on the embedded SmolLM2-135M-Instruct, on CPU.
# Sets up .venv first if needed. Extra arguments are Hydra overrides (e.g. max_steps=50 seed=1).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/bootstrap.sh"
PY="${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/python}"; PY="${PY:-$ROOT/.venv/bin/python}"
cd "$ROOT"
exec "$PY" examples/start_agentic_pipeline.py \
  --config-path examples/smollm2-135M-agentic_cpu --config-name agent_val_frozen_lake "$@"
