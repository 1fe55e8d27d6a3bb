"""ROLL's rollout dump and mock, at the pipeline level: the training Batch each step gets from the
rollout is written to disk (dump), or read back from disk instead of generating (mock), so the
trainer can be debugged, profiled or compared across versions on exactly the same data.

- `rollout_dump_dir: DIR`, or `rollout_mock: {enable: true, mode: dump, dump_dir: DIR}`: every
  training step's batch goes to DIR/step_000001.pt, … (torch.save of the Batch).
- `rollout_mock: {enable: true, mode: mock, dump_dir: DIR}`: step N trains on DIR/step_00000N.pt;
  no generation runs for training (validation, when eval_steps > 0, still generates).

Dumps are pickles: load only dumps you wrote.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import torch

from roll.data.batch import Batch
from roll.data.episodes import batch_episode_keys

if TYPE_CHECKING:
    from roll.configs.agentic_config import AgenticConfig

MOCK_MODES = ("dump", "mock")
_STEP_FILE = re.compile(r"^step_(\d+)\.pt$")


def step_file(folder: str | Path, step: int) -> Path:
    return Path(folder) / f"step_{step:06d}.pt"


def dumped_steps(folder: str | Path) -> list[int]:
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(int(m.group(1)) for p in folder.iterdir() if (m := _STEP_FILE.match(p.name)))


def save_batch(batch: Batch, folder: str | Path, step: int) -> Path:
    """Writes the batch for `step` (to a temporary name first, so a reader never sees half a file)."""
    path = step_file(folder, step)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".pt.partial")
    torch.save(batch, partial)
    os.replace(partial, path)
    return path


def load_batch(folder: str | Path, step: int) -> Batch:
    path = step_file(folder, step)
    if not path.is_file():
        have = dumped_steps(folder)
        raise FileNotFoundError(
            f"rollout_mock: no dumped batch for step {step} in {folder} (it holds steps {have or 'none'}). "
            f"Dump at least max_steps steps first (rollout_mock.mode: dump), or lower max_steps."
        )
    return torch.load(path, weights_only=False)  # our own Batch pickles (see the module docstring)


def dump_and_mock_dirs(config: "AgenticConfig") -> tuple[list[str], str | None]:
    """(folders to dump each batch into, folder to replay batches from or None)."""
    dumps = [config.rollout_dump_dir] if config.rollout_dump_dir else []
    mock = config.rollout_mock
    if mock is not None and mock.enable:
        if mock.mode == "dump" and mock.dump_dir not in dumps:
            dumps.append(mock.dump_dir)
        elif mock.mode == "mock":
            return dumps, mock.dump_dir
    return dumps, None


def episode_count(batch: Batch) -> int:
    """Episodes in a rollout batch: its rows, the rows of one episode (one traj_id) counted once."""
    return len(set(batch_episode_keys(batch)))


class RecordedRollout:
    """The train rollout with dump and mock around `get_batch`; in mock mode none is built."""

    def __init__(self, build: Callable[[], Any], dump_dirs: list[str], mock_dir: str | None) -> None:
        self.dump_dirs, self.mock_dir = dump_dirs, mock_dir
        self.inner = None if mock_dir else build()

    def get_batch(self, size: int, step: int) -> Batch:
        if self.mock_dir:
            batch = load_batch(self.mock_dir, step)
            episodes = episode_count(batch)
            if episodes != size:
                raise ValueError(f"rollout_mock: the batch dumped for step {step} in {self.mock_dir} has {episodes} "
                                 f"episodes but rollout_batch_size is {size}; replay with the config that dumped it.")
        else:
            batch = self.inner.get_batch(size, step)
        for folder in self.dump_dirs:
            save_batch(batch, folder, step)
        return batch

    def shutdown(self) -> None:
        if self.inner is not None:
            self.inner.shutdown()


def recorded_rollout(config: "AgenticConfig", build: Callable[[], Any]) -> Any:
    """`build()` (the train rollout) as it is, or wrapped for dump / mock when the config asks."""
    dump_dirs, mock_dir = dump_and_mock_dirs(config)
    if not dump_dirs and mock_dir is None:
        return build()
    return RecordedRollout(build, dump_dirs, mock_dir)
