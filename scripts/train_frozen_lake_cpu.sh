#!/usr/bin/env bash
# The main job: a short FrozenLake GRPO run on the embedded SmolLM2-135M-Instruct, on CPU (about 13
# minutes on 2 cores). Sets up .venv first if needed. With arguments, they replace the short-run
# settings as Hydra overrides: `bash scripts/train_frozen_lake_cpu.sh max_steps=20` is the full run
# of examples/smollm2-135M-agentic_cpu (about an hour; see its README for the learning curve).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/bootstrap.sh"
PY="${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/python}"; PY="${PY:-$ROOT/.venv/bin/python}"
cd "$ROOT"
if [ "$#" -eq 0 ]; then
  # 3 steps of one group of 8 episodes, a warm-up of 2 x 8 random-move episodes, 16 validation maps
  # after the warm-up and at the end (the base model before it answers nothing valid, and playing it out
  # cost a minute): sized to finish within 15 minutes on 2 cores (see the README for what it shows).
  set -- exp_name=frozen_lake_cpu_short max_steps=3 eval_steps=3 save_steps=3 \
         sft_warmup.steps=2 sft_warmup.episodes_per_step=8 sft_warmup.validate_before=false \
         rollout_batch_size=8 train_env_manager.num_env_groups=1 \
         actor_train.training_args.gradient_accumulation_steps=1 \
         val_batch_size=16 val_env_manager.num_env_groups=16
fi
exec "$PY" examples/start_agentic_pipeline.py \
  --config-path examples/smollm2-135M-agentic_cpu --config-name agent_val_frozen_lake "$@"
