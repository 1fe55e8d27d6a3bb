"""AsyncRollout's gate and its timed waits, on a real local RolloutScheduler (FrozenLake, random policy)."""

import pytest

from roll.configs.agentic_config import EnvManagerConfig
from roll.pipeline.agentic.async_rollout import AsyncRollout
from roll.pipeline.agentic.rollout_scheduler import RolloutScheduler
from tests.rollout.helpers import FROZEN_LAKE_SPEC


def async_rollout(tiny_model_dir, pushed, batch_size=4, timeout_s=3.0):
    scheduler = RolloutScheduler(EnvManagerConfig(num_env_groups=2, group_size=2, tags=["FrozenLake"]),
                                 {"FrozenLake": FROZEN_LAKE_SPEC}, sequence_length=700, seed=1,
                                 tokenizer_path=str(tiny_model_dir), proxy={"type": "random"}, executor="local")
    return AsyncRollout(scheduler, lambda weights, version: pushed.append((weights, version)), ratio=1,
                        batch_size=batch_size, first_step=1, last_step=3, timeout_s=timeout_s)


def test_the_rollout_runs_one_version_ahead_and_no_further(tiny_model_dir):
    pushed = []
    rollout = async_rollout(tiny_model_dir, pushed)
    try:
        rollout.publish(1, "weights-v1")
        first, second = rollout.get_batch(4, 1), rollout.get_batch(4, 2)  # step 2 needs version ≥ 1: no wait
        assert len(first) == len(second) == 4
        assert pushed == [("weights-v1", 1)]  # loaded once, before the first batch
        # step 3 needs version 2, which this trainer never publishes: whichever wait gives up first (the
        # rollout's for weights, or the trainer's for the batch), the error says what was awaited
        with pytest.raises((RuntimeError, TimeoutError), match=r"step 3.*(waited 3s .*weights of version 2 "
                                                               r"\(it has published 1\)|weights of version 2 to start step 3)"):
            rollout.get_batch(4, 3)
    finally:
        rollout.shutdown()


def test_new_weights_are_loaded_before_the_next_batch(tiny_model_dir):
    pushed = []
    rollout = async_rollout(tiny_model_dir, pushed)
    try:
        rollout.publish(1, "weights-v1")
        rollout.get_batch(4, 1)
        rollout.publish(2, "weights-v2")
        rollout.get_batch(4, 2)
        batch = rollout.get_batch(4, 3)
        assert pushed[0] == ("weights-v1", 1) and pushed[-1] == ("weights-v2", 2)
        assert batch.info["async/weight_syncs"] == 2.0 and batch.info["async/dropped_samples"] == 0.0
    finally:
        rollout.shutdown()


def test_the_trainer_does_not_wait_forever_for_a_batch(tiny_model_dir):
    rollout = async_rollout(tiny_model_dir, [], timeout_s=0.5)
    try:
        with pytest.raises(TimeoutError, match="waited 0s .* for the rollout batch of step 1; the rollout thread is "
                                               r"not running \(no weights published yet\)"):
            rollout.get_batch(4, 1)  # no weights were ever published, so the rollout never started
    finally:
        rollout.shutdown()


def test_an_error_in_the_rollout_thread_stops_the_trainer_with_its_step(tiny_model_dir):
    rollout = async_rollout(tiny_model_dir, [], batch_size=3)  # not a multiple of group_size
    try:
        rollout.publish(1, "weights-v1")
        with pytest.raises(ValueError, match="async rollout makes batches of 3"):
            rollout.get_batch(4, 1)
        with pytest.raises(RuntimeError, match="rollout for step 1 failed: batch size 3 must be a positive multiple"):
            rollout.get_batch(3, 1)
    finally:
        rollout.shutdown()
