"""Which rows of a Batch belong to one episode: the rollout gives every sample of an episode the
episode's traj_id (a step-wise env manager makes one row per turn; an agent runner's episode is
several samples when its agent rewrote its history); a row without one is an episode of its own."""

from __future__ import annotations

from roll.data.batch import Batch


def episode_key(traj_id: str | None, sample_key: object) -> object:
    """Which episode a sample belongs to: its traj_id, shared by all the episode's samples; a sample
    without one is an episode of its own (`sample_key`)."""
    return traj_id or sample_key


def batch_episode_keys(batch: Batch) -> list[object]:
    """episode_key of each row of a batch (a row without traj_id is an episode of its own)."""
    traj_ids = batch.meta.get("traj_id", [None] * len(batch))
    return [episode_key(traj_ids[i], i) for i in range(len(batch))]


def first_row_per_episode(batch: Batch) -> list[int]:
    """The first row of each episode in a batch, in order (an episode may have several rows)."""
    seen: set[object] = set()
    rows = []
    for row, key in enumerate(batch_episode_keys(batch)):
        if key not in seen:
            seen.add(key)
            rows.append(row)
    return rows
