"""batch_adjust_mode: the count of training samples becomes a multiple of the optimizer batch."""

from __future__ import annotations

import random

import pytest
import torch

from roll.data.batch import Batch
from roll.pipeline.agentic.batch_adjust import adjusted_indices, take_rows, train_multiple


def rows(size: int, mode, multiple: int = 8, seed: int = 0) -> list[int]:
    return adjusted_indices(size, multiple, mode, random.Random(seed))


def test_none_and_exact_multiples_change_nothing():
    assert rows(13, None) == list(range(13))
    for mode in ("copy", "delete", "auto", "random_sample"):
        assert rows(16, mode) == list(range(16))


def test_copy_appends_distinct_copies_up_to_the_next_multiple():
    got = rows(13, "copy")
    assert len(got) == 16 and got[:13] == list(range(13))
    assert len(set(got[13:])) == 3 and set(got[13:]) <= set(range(13))
    tiny = rows(3, "copy")  # more copies than samples: repeats allowed
    assert len(tiny) == 8 and set(tiny) == {0, 1, 2}


def test_delete_drops_the_remainder_and_never_empties_the_batch():
    got = rows(13, "delete")
    assert len(got) == 8 and got == sorted(got) and len(set(got)) == 8
    assert len(rows(5, "delete")) == 8  # deleting 5 of 5 would empty it: copies instead


def test_auto_deletes_a_small_remainder_and_copies_a_large_one():
    assert len(rows(17, "auto")) == 16  # remainder 1 < 17 / 2: delete
    assert len(rows(6, "auto")) == 8  # fewer samples than one multiple: copy
    assert len(rows(20, "auto", multiple=16)) == 16  # remainder 4 < 10: delete


def test_random_sample_keeps_exactly_one_multiple():
    got = rows(21, "random_sample")
    assert len(got) == 8 and len(set(got)) == 8
    assert len(rows(5, "random_sample")) == 8


def test_unknown_mode_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="batch_adjust_mode must be one of"):
        rows(13, "duplicate")


def test_take_rows_indexes_tensors_and_meta_and_counts():
    batch = Batch(tensors={"x": torch.arange(5)}, meta={"traj_id": list("abcde")})
    out, metrics = take_rows(batch, [0, 1, 2, 3, 4, 1, 3, 0])
    assert out["x"].tolist() == [0, 1, 2, 3, 4, 1, 3, 0] and out["traj_id"][5:] == ["b", "d", "a"]
    assert metrics == {"system/batch_add_count": 3.0, "system/batch_remove_count": 0.0}
    out, metrics = take_rows(batch, [0, 2, 4])
    assert out["traj_id"] == ["a", "c", "e"] and metrics["system/batch_remove_count"] == 2.0
    assert train_multiple([4, 6]) == 12 and train_multiple([]) == 1


def test_the_lr_schedule_counts_one_sample_per_turn_for_step_wise_envs():
    from roll.launch.loader import load_agentic_config
    from roll.pipeline.agentic.batch_adjust import max_samples_per_batch
    from roll.pipeline.agentic.builders import optimizer_steps

    cpu = ("examples/smollm2-135M-agentic_cpu", "agent_val_frozen_lake")
    traj = load_agentic_config(*cpu)
    step = load_agentic_config(*cpu, overrides=["adv_estimator=gigpo", "custom_envs.FrozenLakeCPU.env_manager_cls="
                                                "roll.pipeline.agentic.env_manager.step_env_manager.StepEnvManager"])
    turns = step.custom_envs["FrozenLakeCPU"].max_steps
    assert max_samples_per_batch(traj) == traj.rollout_batch_size
    assert max_samples_per_batch(step) == step.rollout_batch_size * turns
    assert optimizer_steps(step, step.actor_train) == turns * optimizer_steps(traj, traj.actor_train)
