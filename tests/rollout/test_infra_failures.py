"""Infrastructure failures never reach the advantages: a group with one crashed episode is re-run as a
whole, its finished episodes dropped with it, and the failure counted in rollout/infra_failed_rate."""

from __future__ import annotations

from collections import Counter

from roll.configs.agentic_config import CustomEnvConfig, EnvManagerConfig
from roll.pipeline.agentic.rollout_scheduler import RolloutScheduler
from tests.rollout.faulty_envs import CRASH_ONCE


def test_a_group_with_one_crashed_episode_is_rerun_whole_and_never_trained_in_part(ray_session, tiny_model_dir, tmp_path):
    (tmp_path / CRASH_ONCE).touch()
    env = CustomEnvConfig(env_type="tests.rollout.faulty_envs.CrashOnceFrozenLake", max_steps=3, max_tokens_per_step=8,
                          env_config={"max_steps": 3, "is_slippery": False, "control_dir": str(tmp_path)})
    cfg = EnvManagerConfig(num_env_groups=3, group_size=4, tags=["Crashing"], max_env_num_per_worker=12)
    scheduler = RolloutScheduler(cfg, {"Crashing": env}, sequence_length=700, seed=0,
                                 tokenizer_path=str(tiny_model_dir), proxy={"type": "random"})
    try:
        batch = scheduler.get_batch(12, step=1)
    finally:
        scheduler.shutdown()
    (crashed,) = [int(p.name.removeprefix("crashed-")) for p in tmp_path.glob("crashed-*")]
    # the crashed episode's group mates finished, yet none of them is in the batch
    assert crashed not in batch["env_seed"]
    sizes = Counter(batch["traj_group_id"])
    assert len(batch) == 12 and set(sizes.values()) == {4}
    assert all(len({batch["env_seed"][i] for i, g in enumerate(batch["traj_group_id"]) if g == group}) == 1
               for group in sizes)
    # 4 groups of 4 were launched for 3 whole ones: 1 of their 16 episodes failed
    assert batch.info["rollout/failures/env_error"] == 1
    assert batch.info["rollout/infra_failed_rate"] == 1 / 16
