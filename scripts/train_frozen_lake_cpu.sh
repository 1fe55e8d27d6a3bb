#!/usr/bin/env bash
# The main job: FrozenLake on the embedded SmolLM2-135M-Instruct, on CPU, sized for 15 minutes on 2 cores
# set-up included: a 2-step warm-up on random moves, 16 GRPO steps of one-move episodes (mostly from decision
# points), and 32 validation maps after the warm-up, at step 8 and at the end, beside the map-blind baselines
# (examples/smollm2-135M-agentic_cpu/agent_val_frozen_lake_decisions.yaml). Sets up .venv first if
# needed. Arguments are Hydra overrides: `bash scripts/train_frozen_lake_cpu.sh max_steps=12`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/bootstrap.sh"
PY="${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/python}"; PY="${PY:-$ROOT/.venv/bin/python}"
cd "$ROOT"
exec "$PY" examples/start_agentic_pipeline.py \
  --config-path examples/smollm2-135M-agentic_cpu --config-name agent_val_frozen_lake_decisions "$@"
