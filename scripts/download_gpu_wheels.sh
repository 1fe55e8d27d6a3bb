#!/usr/bin/env bash
# Downloads, into .gpu-wheels/ (git-ignored), the wheels roll needs on the lent GPU machine beyond what
# its image has (Python 3.12, torch, transformers, peft, accelerate, safetensors, tokenizers, numpy,
# pyyaml, rich, tqdm, regex, tensorboard, matplotlib are there; Ray and vLLM are too large to carry
# and scripts/gpu_check.sh needs neither). These make roll's config loading (Hydra) importable there.
# antlr4-python3-runtime 4.9.3 (what omegaconf 2.3 pins) exists only as a source archive: it is pure
# Python, so a wheel is built from it here.
# Then: run scripts/gpu_check.sh there with .gpu-wheels carried along.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
mkdir -p .gpu-wheels
"$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation py \
    --platform any -d .gpu-wheels "hydra-core==1.3.2" "omegaconf==2.3.0"
"$PYTHON" -m pip wheel -q --no-deps -w .gpu-wheels "antlr4-python3-runtime==4.9.3"
ls -l .gpu-wheels
