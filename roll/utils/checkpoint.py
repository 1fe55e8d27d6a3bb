"""Checkpoint helpers shared by the workers and the pipeline: RNG states, reading Hugging Face weight files.

A worker's checkpoint folder holds its Hugging Face folder (weights + tokenizer; a LoRA run: the
adapter), `optimizer.pt` (optimizer + lr scheduler) and `worker_state_rank{r}.pt` (each rank's RNG
states and counters). The run's layout (`checkpoint-{step}/{role}/`, which one to resume from) is the
pipeline's: roll/pipeline/agentic/checkpoints.py.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file

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
