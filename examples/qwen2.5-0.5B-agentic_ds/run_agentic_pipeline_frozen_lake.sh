#!/bin/bash
# Runs the guide's FrozenLake example. Extra arguments are Hydra overrides, e.g. exp_name=x seed=123.
# For a machine without a GPU, point CONFIG_PATH_DIR at examples/smollm2-135M-agentic_cpu.

CONFIG_NAME="${CONFIG_NAME:-agent_val_frozen_lake}"                         # agent_val_frozen_lake.yaml
CONFIG_PATH_DIR="${CONFIG_PATH_DIR:-examples/qwen2.5-0.5B-agentic_ds}"

SCRIPT_DIR=$(dirname "$(realpath "$0")")
PROJECT_ROOT=$(dirname "$(dirname "$SCRIPT_DIR")")

export PYTHONPATH=$PROJECT_ROOT:$PYTHONPATH
export RAY_LOG_WITHOUT_ANSI_CODES=1

PYTHON="${PYTHON:-python}"
if [ -x "$PROJECT_ROOT/.venv/bin/python" ] && [ -z "$VIRTUAL_ENV" ]; then PYTHON="$PROJECT_ROOT/.venv/bin/python"; fi

echo "PYTHONPATH: $PYTHONPATH"
echo "Using Hydra config directory: $CONFIG_PATH_DIR and config name: $CONFIG_NAME"

cd "$PROJECT_ROOT" && exec "$PYTHON" "$PROJECT_ROOT/examples/start_agentic_pipeline.py" \
       --config-path "$CONFIG_PATH_DIR" \
       --config-name "$CONFIG_NAME" \
       "$@"   # Pass through any extra args
