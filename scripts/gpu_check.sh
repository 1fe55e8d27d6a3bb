#!/usr/bin/env bash
# One command for a lent GPU machine (python3 with torch, transformers, peft, accelerate; no network, no
# Hydra, Ray or vLLM): runs benchmarks/gpu_check.py, which prints one table. It needs nothing beyond what
# that machine has, so no wheels are carried (the check refuses to import Hydra, OmegaConf, Ray or vLLM).
#
#   scripts/gpu_check.sh [--out DIR]      # CUDA: Qwen2.5-0.5B-shaped random model, bf16
#   scripts/gpu_check.sh --device cpu     # no GPU (here, CI): the tiny random model; hides any GPU
#
# PYTHON picks the interpreter (default python3). Exit status 1 when a check failed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
for arg in "$@"; do
    case "$arg" in cpu | --device=cpu) export CUDA_VISIBLE_DEVICES="" ;; esac
done
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export CUBLAS_WORKSPACE_CONFIG=:4096:8  # lets the checkpoint check ask cuBLAS for deterministic kernels
exec "$PYTHON" benchmarks/gpu_check.py "$@"
