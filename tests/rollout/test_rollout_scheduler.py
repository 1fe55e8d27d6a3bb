"""Rollouts through Ray: whole GRPO groups, group seeds, sequence_length, failure isolation, seeds."""

from __future__ import annotations

import ray
import pytest

from roll.configs.agentic_config import CustomEnvConfig, EnvManagerConfig
from roll.pipeline.agentic.rollout_scheduler import RolloutScheduler
from roll.workers.infer_worker import InferWorker

from tests.rollout.helpers import greedy, infer_config


def frozen_lake(env_type: str = "frozen_lake", max_steps: int = 3) -> CustomEnvConfig:
    return CustomEnvConfig(env_type=env_type, max_steps=max_steps, max_tokens_per_step=8,
                           env_config={"max_steps": max_steps, "is_slippery": False})


def test_64_frozen_lake_episodes_through_ray_in_whole_groups(ray_session, tiny_model_dir):
    infer = ray.remote(InferWorker).options(num_cpus=1, **InferWorker.RAY_ACTOR_OPTIONS).remote(
        infer_config(tiny_model_dir), num_threads=1)
    cfg = EnvManagerConfig(num_env_groups=8, group_size=8, tags=["FrozenLake"], max_env_num_per_worker=32,
                           generating_args=greedy(8))
    scheduler = RolloutScheduler(cfg, {"FrozenLake": frozen_lake()}, sequence_length=700, seed=1,
                                 tokenizer_path=str(tiny_model_dir), infer=[infer])
    try:
        batch = scheduler.get_batch(64, step=0)
        assert ray.get(infer.get_stats.remote())["cached_tokens"] > 0  # later turns reused the episode's KV cache
        threads = ray.get([w.torch_threads.remote() for w in scheduler.workers])
    finally:
        scheduler.shutdown()
        ray.kill(infer)
    assert len(batch) == 64 and threads == [1, 1]
    assert batch["input_ids"].shape[1] <= 700
    assert (batch["attention_mask"].sum(1) <= 700).all()
    groups: dict[str, list[int]] = {}
    for i, g in enumerate(batch["traj_group_id"]):
        groups.setdefault(g, []).append(i)
    assert len(groups) == 8 and all(len(v) == 8 for v in groups.values())
    first_maps = set()
    for members in groups.values():
        seeds = {batch["env_seed"][i] for i in members}
        maps = {batch["messages"][i][1]["content"] for i in members}  # the first user turn shows the map
        assert len(seeds) == 1 and len(maps) == 1
        first_maps |= maps
    assert len({batch["env_seed"][m[0]] for m in groups.values()}) == 8
    assert len(first_maps) > 1  # different groups got different maps
    # tensors agree with the token convention
    assert ((batch["response_mask"] == 1) <= (batch["attention_mask"] == 1)).all()
    assert (batch["infer_logprobs"][batch["response_mask"] == 0] == 0).all()
    assert (batch["infer_logprobs"][batch["response_mask"] == 1] < 0).all()
    assert batch.info["rollout/failures"] == 0
    for key in ("env/FrozenLake/success", "env/FrozenLake/action_is_valid", "env/FrozenLake/num_actions", "time/rollout"):
        assert key in batch.info


@pytest.mark.parametrize("env_type,kind", [
    ("tests.rollout.faulty_envs.RaisingFrozenLake", "env_error"),
    ("tests.rollout.faulty_envs.HangingFrozenLake", "env_timeout"),
])
def test_an_env_that_raises_or_hangs_fails_only_its_episode(ray_session, tiny_model_dir, env_type, kind, caplog):
    cfg = EnvManagerConfig(num_env_groups=4, group_size=2, tags=["Faulty"], max_env_num_per_worker=8, env_timeout_s=1.0)
    scheduler = RolloutScheduler(cfg, {"Faulty": frozen_lake(env_type, max_steps=2)}, sequence_length=700, seed=0,
                                 tokenizer_path=str(tiny_model_dir), proxy={"type": "random"})
    try:
        with caplog.at_level("WARNING"):
            batch = scheduler.get_batch(8, step=0)
    finally:
        scheduler.shutdown()
    assert len(batch) == 8
    assert batch.info["rollout/failures"] >= 1 and batch.info[f"rollout/failures/{kind}"] >= 1
    assert all(seed % 3 != (0 if kind == "env_error" else 1) for seed in batch["env_seed"])  # failed seeds were replaced
    assert any(kind in r.message and "tag=Faulty seed=" in r.message for r in caplog.records)
    groups = {}
    for g in batch["traj_group_id"]:
        groups[g] = groups.get(g, 0) + 1
    assert set(groups.values()) == {2}


def test_validation_seeds_are_fixed_across_steps_and_training_seeds_are_not(ray_session, tiny_model_dir):
    cfg = EnvManagerConfig(num_env_groups=2, group_size=2, tags=["FrozenLake"])
    runs = {}
    for mode in ("val", "train"):
        scheduler = RolloutScheduler(cfg, {"FrozenLake": frozen_lake()}, sequence_length=700, seed=5,
                                     tokenizer_path=str(tiny_model_dir), proxy={"type": "random"}, mode=mode,
                                     executor="local")
        try:
            runs[mode] = [scheduler.get_batch(4, step=s)["env_seed"] for s in (0, 3)]
        finally:
            scheduler.shutdown()
    assert runs["val"][0] == runs["val"][1]
    assert runs["train"][0] != runs["train"][1]
    with pytest.raises(ValueError, match="multiple of group_size"):
        RolloutScheduler(cfg, {"FrozenLake": frozen_lake()}, 700, 5, str(tiny_model_dir),
                         proxy={"type": "random"}, executor="local").get_batch(3, step=0)


def test_seeds_per_tag_gives_every_tag_the_same_seeds(tiny_model_dir):
    """Two variants of one env (here two FrozenLake tags) validated on the same maps with seeds_per_tag;
    without it the tags split one numbering and never share a seed."""
    envs = {"A": frozen_lake(), "B": frozen_lake()}
    seeds = {}
    for per_tag in (False, True):
        cfg = EnvManagerConfig(num_env_groups=4, group_size=1, tags=["A", "B"], seeds_per_tag=per_tag)
        scheduler = RolloutScheduler(cfg, envs, sequence_length=700, seed=5, tokenizer_path=str(tiny_model_dir),
                                     proxy={"type": "random"}, mode="val", executor="local")
        try:
            batch = scheduler.get_batch(8, step=0)
        finally:
            scheduler.shutdown()
        by_tag = {tag: sorted(s for t, s in zip(batch["tag"], batch["env_seed"]) if t == tag) for tag in "AB"}
        assert len(by_tag["A"]) == len(by_tag["B"]) == 4 and len(set(by_tag["A"])) == 4
        seeds[per_tag] = by_tag
        maps = {tag: sorted(m[1]["content"] for t, m in zip(batch["tag"], batch["messages"]) if t == tag) for tag in "AB"}
        assert (maps["A"] == maps["B"]) == per_tag  # the same seeds are the same maps
    assert seeds[True]["A"] == seeds[True]["B"]
    assert not set(seeds[False]["A"]) & set(seeds[False]["B"])
    assert seeds[True]["A"] == sorted(seeds[False]["A"] + seeds[False]["B"])[:4]  # the first seeds of one numbering
