"""Checkpoint helpers: folder layout, RNG states, reading Hugging Face weight files.

Layout (SPEC.md §6): `output_dir/checkpoint-{step}/{role}/` holds one role's Hugging Face folder
(weights + tokenizer; a LoRA run: the adapter), `optimizer.pt` (optimizer + lr scheduler),
`worker_state_rank{r}.pt` (each rank's RNG states and counters). The pipeline adds its own state beside.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file

CHECKPOINT_PATTERN = re.compile(r"^checkpoint-(\d+)$")


def checkpoint_dir(output_dir: str | Path, step: int) -> Path:
    return Path(output_dir) / f"checkpoint-{step}"


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    """The `checkpoint-{step}` folder with the highest step under output_dir, or None."""
    root = Path(output_dir)
    if not root.is_dir():
        return None
    found = [(int(m.group(1)), p) for p in root.iterdir() if p.is_dir() and (m := CHECKPOINT_PATTERN.match(p.name))]
    return max(found)[1] if found else None


def rng_state() -> dict:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def load_safetensors_dir(directory: str | Path) -> dict[str, torch.Tensor]:
    """All tensors of the *.safetensors files in a folder (sharded or not), on CPU."""
    files = sorted(Path(directory).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors weights in {directory}; is it a checkpoint written by roll?")
    state: dict[str, torch.Tensor] = {}
    for f in files:
        state.update(load_file(str(f)))
    return state
