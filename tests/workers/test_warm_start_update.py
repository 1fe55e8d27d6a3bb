"""What a resume carries into the first update of a changed config, on a small case.

Stage one trains on replies made of some tokens; stage two (a changed config: a new prompt line, a new
reward) brings other tokens into the replies. Resumed, stage two keeps stage one's AdamW moments and
its schedule position. Two things follow, both measured here:
- A weight whose gradient was 0 all of stage one (the input rows of the new tokens) has moments of 0,
  and its first gradient moves it by lr × (1 − β1)/(1 − β1^t) / √((1 − β2)/(1 − β2^t)) at optimizer step t:
  0.57 × lr at t = 31, 1.06 × lr at t = 120 (the Sokoban runs' checkpoint-30), up to 3.16 × lr once
  t ≫ 1000. A fresh AdamW's first step moves every weight by at most lr.
- The schedule does not start again: the first update of the changed config runs at the full learning
  rate, where a new run's warm-up starts from 0.
A warm start (the default of warm_start_from) loads the weights only: fresh moments, fresh schedule.
"""

from __future__ import annotations

import dataclasses

import torch

from roll.configs.worker_config import TrainingArgs
from roll.data.batch import Batch
from roll.distributed import Cluster
from roll.workers.actor_worker import ActorWorker
from roll.workers.train_worker import LossConfig
from tests.workers.helpers import actor_config

PROMPT = [11, 12, 13, 14, 15]
STAGE_ONE_REPLY = [201, 202, 203, 204]
STAGE_TWO_REPLY = [301, 302, 303, 304]  # tokens no reply of stage one held
LR = 1e-3
EMBED = "model.embed_tokens.weight"


def reply_batch(reply: list[int], n: int = 4) -> Batch:
    ids = torch.tensor([PROMPT + reply] * n)
    response = torch.zeros_like(ids)
    response[:, len(PROMPT):] = 1
    return Batch({"input_ids": ids, "attention_mask": torch.ones_like(ids), "response_mask": response,
                  "advantages": response.float()})


def train(actor: Cluster, batch: Batch) -> None:
    batch.tensors["old_logprobs"] = actor.execute_rank0("compute_log_probs", batch)["logprobs"]
    actor.execute_rank0("train_step", batch, LossConfig(pg_clip_low=10.0, pg_clip_high=100.0))


def first_update(tiny_model_dir, checkpoint, load: str, warmup_steps: int = 0) -> dict[str, torch.Tensor]:
    """The weight change of stage two's first update, after loading stage one's checkpoint `load`s way."""
    config = dataclasses.replace(actor_config(tiny_model_dir), training_args=TrainingArgs(
        learning_rate=LR, per_device_train_batch_size=4, warmup_steps=warmup_steps))
    actor = Cluster("actor_train", ActorWorker, config, executor="local")
    try:
        if load == "resume":
            actor.execute_all("load_checkpoint", str(checkpoint))
        else:
            actor.execute_all("load_warm_start", str(checkpoint), load == "warm_start_with_optimizer")
        before = actor.execute_rank0("get_state_dict")
        train(actor, reply_batch(STAGE_TWO_REPLY))
        after = actor.execute_rank0("get_state_dict")
    finally:
        actor.shutdown()
    return {k: after[k] - before[k] for k in before}


def test_resumed_moments_move_weights_new_to_the_replies_3x_the_learning_rate(tiny_model_dir, tmp_path, ray_session):
    config = dataclasses.replace(actor_config(tiny_model_dir), training_args=TrainingArgs(
        learning_rate=LR, per_device_train_batch_size=4, warmup_steps=3))
    actor = Cluster("actor_train", ActorWorker, config, executor="local")
    try:
        for _ in range(30):  # stage one: past its warm-up, many optimizer steps on its own replies
            train(actor, reply_batch(STAGE_ONE_REPLY))
        actor.execute_all("save_checkpoint", str(tmp_path / "stage_one"))
    finally:
        actor.shutdown()

    resumed = first_update(tiny_model_dir, tmp_path / "stage_one", "resume")
    moments_kept = first_update(tiny_model_dir, tmp_path / "stage_one", "warm_start_with_optimizer")
    fresh = first_update(tiny_model_dir, tmp_path / "stage_one", "warm_start")
    ramped = first_update(tiny_model_dir, tmp_path / "stage_one", "warm_start", warmup_steps=10)

    t = 31  # stage two's first optimizer step
    expected = (0.1 / (1 - 0.9**t)) / ((0.001 / (1 - 0.999**t)) ** 0.5)
    new_rows = lambda delta: delta[EMBED][STAGE_TWO_REPLY[:-1]].abs() / LR  # noqa: E731  input rows of the new tokens
    largest = lambda delta: max(float(d.abs().max()) for d in delta.values()) / LR  # noqa: E731
    assert abs(float(new_rows(resumed).max()) - expected) < 0.01 * expected  # 0.574: the moments' rule
    assert torch.equal(moments_kept[EMBED], resumed[EMBED])  # optimizer: true carries the same state
    assert largest(resumed) > 0.5  # the full learning rate at once: the schedule went on where it was
    assert largest(fresh) <= 1.0 + 1e-4  # a fresh AdamW's first step: at most the learning rate
    assert float(new_rows(fresh).median()) > 0.99  # …which a weight new to the replies takes in full
    assert largest(ramped) == 0.0  # and a new schedule's warm-up starts at learning rate 0
