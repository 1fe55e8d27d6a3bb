"""Where a run's checkpoints live, how one is written atomically, and which one a resume starts from.

Layout: `<root>/checkpoint-<step>/` holding `pipeline_state.pt` (step, KL coefficient, driver RNG,
rollout state) and one folder per trained role (`actor_train/`, `critic/`) written by the workers.
A checkpoint is first written as `checkpoint-<step>.tmp` and renamed when complete, so a run killed
mid-save never leaves a checkpoint that looks whole.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import torch

from roll.utils.checkpoint import rng_state, set_rng_state

_NAME = re.compile(r"^checkpoint-(\d+)$")
STATE_FILE = "pipeline_state.pt"


def checkpoint_root(output_dir: str, checkpoint_config: dict[str, Any]) -> Path:
    return Path(checkpoint_config.get("output_dir") or Path(output_dir) / "checkpoints")


def latest_checkpoint(root: Path) -> Path | None:
    if not root.is_dir():
        return None
    complete = [(int(m.group(1)), p) for p in root.iterdir() if (m := _NAME.match(p.name)) and (p / STATE_FILE).is_file()]
    return max(complete)[1] if complete else None


def resolve_resume(resume_from_checkpoint: bool | str, root: Path) -> Path | None:
    """None for a fresh run; the checkpoint folder to continue from otherwise."""
    if resume_from_checkpoint is False or resume_from_checkpoint in ("", "false", "False"):
        return None
    if resume_from_checkpoint is True or resume_from_checkpoint in ("true", "True", "latest"):
        return latest_checkpoint(root)  # nothing saved yet: start fresh, so `true` is safe on a first launch
    path = Path(resume_from_checkpoint)
    if not (path / STATE_FILE).is_file():
        raise FileNotFoundError(f"resume_from_checkpoint: {path} is not a complete roll checkpoint (no {STATE_FILE}); "
                                f"use true for the latest under {root}")
    return path


def saved_parts(uses_critic: bool, keeps_reference: bool) -> list[str]:
    """The worker folders a checkpoint of this run holds (AgenticPipeline.save_checkpoint)."""
    return ["actor_train"] + ["critic"] * uses_critic + ["reference"] * keeps_reference


def require_parts(path: Path, parts: list[str]) -> None:
    """Fails before any worker starts when the checkpoint lacks a folder this run must load."""
    for part in parts:
        if (path / part).is_dir():
            continue
        if part == "reference":
            raise FileNotFoundError(
                f"resume_from_checkpoint: {path} has no reference/ folder, which a run with sft_warmup and a "
                f"reference (KL term) loads: its warmed-up reference is kept there, as a resumed run skips the "
                f"warm-up. This checkpoint was saved by a run without sft_warmup, or before roll kept the "
                f"reference. To go on with it as it was saved, with the base model as reference, resume with "
                f"sft_warmup.steps=0; or start the run afresh")
        raise FileNotFoundError(f"resume_from_checkpoint: {path} has no {part}/ folder, which this run loads "
                                f"(was it saved with another config? a critic is saved only by runs that use one)")


def staging_dir(root: Path, step: int) -> Path:
    path = root / f"checkpoint-{step}.tmp"
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def commit(staging: Path, state: dict[str, Any]) -> Path:
    """Writes the pipeline state last, then renames the folder into place."""
    torch.save({**state, "rng": rng_state()}, staging / STATE_FILE)
    final = staging.with_name(staging.name.removesuffix(".tmp"))
    shutil.rmtree(final, ignore_errors=True)
    staging.rename(final)
    return final


def load_state(path: Path) -> dict[str, Any]:
    state = torch.load(path / STATE_FILE, weights_only=False)
    set_rng_state(state.pop("rng"))
    return state

