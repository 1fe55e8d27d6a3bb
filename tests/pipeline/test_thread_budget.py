"""Torch threads never oversubscribe the cores: the workers of one role share them, env workers take one."""

import ray

from roll.configs.worker_config import WorkerConfig
from roll.distributed.cluster import Cluster, cpu_count
from roll.configs.agentic_config import CustomEnvConfig, EnvManagerConfig
from roll.pipeline.agentic.rollout_scheduler import RolloutScheduler
from tests.pipeline.thread_probe import ThreadProbe


def test_workers_of_a_role_share_the_cores(ray_session):
    for count in (1, 2):
        cluster = Cluster("probe", ThreadProbe, WorkerConfig(device_mapping=list(range(count))))
        try:
            threads = cluster.execute_all("threads")
        finally:
            cluster.shutdown()
        assert len(threads) == count
        assert sum(threads) <= max(cpu_count(), count)
        assert min(threads) >= 1


def test_env_workers_take_a_single_thread(ray_session, tiny_model_dir):
    manager = EnvManagerConfig(num_env_groups=2, group_size=2, tags=["FL"], max_env_num_per_worker=2)
    scheduler = RolloutScheduler(manager, {"FL": CustomEnvConfig(env_type="frozen_lake")}, 256, 0,
                                 tokenizer_path=str(tiny_model_dir), proxy={"type": "random"})
    try:
        assert len(scheduler.workers) == 2
        assert ray.get([w.torch_threads.remote() for w in scheduler.workers]) == [1, 1]
    finally:
        scheduler.shutdown()
