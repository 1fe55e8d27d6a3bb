"""Async training end to end: ROLL's agent_val_frozen_lake_async.yaml (async_generation_ratio: 1) with
`--cpu pretrain=tiny-random-qwen2`, through the launcher and a real Ray. Every step's rollout batch is
dumped as it was generated (rollout_dump_dir), so the test recomputes from the dumps, independently of
the pipeline's filter, which samples were too stale to train on."""

from __future__ import annotations

import torch

from tests.pipeline.test_roll_configs_run import run_one_step, work  # noqa: F401 (fixture)

STEPS = 4
RATIO = 1


def test_async_config_never_trains_a_sample_older_than_the_ratio(work):  # noqa: F811
    dumps = work / "dumps"
    logged = run_one_step(work, "agent_val_frozen_lake_async", "async", f"max_steps={STEPS}",
                          f"rollout_dump_dir={dumps}")
    steps = {m["step"]: m for m in logged if "actor/pg_loss" in m}
    assert sorted(steps) == list(range(1, STEPS + 1))
    staleness_seen = []
    for step, metrics in steps.items():
        batch = torch.load(dumps / f"step_{step:06d}.pt", weights_only=False)
        versions = batch.meta["weight_version"]
        assert all(v >= 1 for v in versions), versions  # hf_infer reports the version it generated with
        stale_groups = {g for g, v in zip(batch.meta["traj_group_id"], versions) if step - v > RATIO}
        expected_dropped = sum(g in stale_groups for g in batch.meta["traj_group_id"])
        assert metrics["async/dropped_samples"] == expected_dropped
        kept = [step - v for g, v in zip(batch.meta["traj_group_id"], versions) if g not in stale_groups]
        assert max(kept) <= RATIO and metrics["async/staleness_max"] == max(kept)
        assert metrics["system/samples"] == len(batch) - expected_dropped
        assert metrics["time/trainer_wait_rollout"] >= 0 and metrics["time/rollout_wait_weights"] >= 0
        staleness_seen.append(max(kept))
    # the rollout of step k + 1 ran while step k trained: from step 2 on it used the weights one behind
    assert staleness_seen[0] == 0 and all(s == RATIO for s in staleness_seen[1:]), staleness_seen
