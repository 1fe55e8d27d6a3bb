"""Which rows of a Batch belong to one episode: a step-wise env manager makes one row per turn, all
sharing the episode's traj_id; any other row is an episode of its own."""

from __future__ import annotations

from roll.data.batch import Batch


def episode_key(traj_id: str | None, step_index: int | None, sample_key: object) -> object:
    """Which episode a sample belongs to: a step-wise manager's samples of one episode (one per turn,
    each with a step_index) share its traj_id; any other sample is an episode of its own (`sample_key`)."""
    return traj_id if step_index is not None and traj_id else sample_key


def batch_episode_keys(batch: Batch) -> list[object]:
    """episode_key of each row of a batch (a row without traj_id or step_index is an episode of its own)."""
    unknown = [None] * len(batch)
    traj_ids, step_indices = batch.meta.get("traj_id", unknown), batch.meta.get("step_index", unknown)
    return [episode_key(traj_ids[i], step_indices[i], i) for i in range(len(batch))]


def first_row_per_episode(batch: Batch) -> list[int]:
    """The first row of each episode in a batch, in order (a step-wise episode has one row per turn)."""
    seen: set[object] = set()
    rows = []
    for row, key in enumerate(batch_episode_keys(batch)):
        if key not in seen:
            seen.add(key)
            rows.append(row)
    return rows
