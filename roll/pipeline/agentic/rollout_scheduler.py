"""RolloutScheduler: GRPO groups of envs, their seeds, and the assembly of whole-group batches.

`num_env_groups` groups of `group_size` envs; `num_groups_partition` gives each tag its number of
groups. `get_batch(n, step)` runs n / group_size group-episodes: the envs of one group reset with
the same seed (so a group is one prompt answered group_size times). Groups are dealt round-robin
over tags so any batch size keeps the tag mix. Training seeds change every step; validation seeds
depend only on the episode index, so val metrics compare across steps.

A group in which any episode fails (env raised, env hung past `env_timeout_s`, generation failed)
is re-run on the same envs with a fresh seed; the failure is counted in `rollout/failures/*` and
logged with the tag and seed. Only whole groups enter a batch: the episodes of a failed group that did
finish are dropped with it, so no group-relative advantage is ever computed over part of a group.
Every such failure is an infrastructure fault (an env never raises on model text), and
`rollout/infra_failed_rate` is the share of the episodes launched for the batch that failed. A worker process that dies (kill -9,
the OOM killer) is replaced by Ray and the groups it was running are re-run the same way
(env_worker_pool.py); `rollout/env_worker_restarts` counts the replacements. An env call that
timed out but still runs (a hung `step`) leaves a thread in its worker: once the batch is done, each
such worker process is ended and a fresh one started, counted in
`rollout/env_worker_hang_replacements`. When `infer` is a Cluster
with `max_restarts`, generation lost with a dead inference worker (`infer_worker_died`) waits for
`Cluster.recover()` (the restarted worker gets the current weights) and its group is re-run.

Executors: "ray" hosts env managers in EnvironmentWorker actors; "local" runs them in this process
on threads (for debugging and benchmarks).
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import logging
import math
import time
from collections import Counter
from typing import Any, Callable

from roll.configs.agentic_config import CustomEnvConfig, EnvManagerConfig
from roll.configs.worker_config import GeneratingArgs
from roll.data.batch import Batch
from roll.pipeline.agentic.env_worker_pool import EnvWorkerPool
from roll.pipeline.agentic.environment_worker import EnvSlot
from roll.pipeline.agentic.trajectory import EpisodeFailureResult, Trajectory
from roll.pipeline.agentic.trajectory_batch import one_per_episode, rollout_metrics, trajectories_to_batch

logger = logging.getLogger(__name__)
VAL_SEED_OFFSET = 7_777_777  # keeps validation seeds apart from training seeds


def split_groups(num_env_groups: int, tags: list[str], partition: list[int] | None) -> list[str]:
    """The tag of each group: `partition[i]` groups for `tags[i]`, or an even split."""
    if not tags:
        raise ValueError("env manager config: tags is empty; name at least one custom_envs entry")
    if partition is None:
        base, extra = divmod(num_env_groups, len(tags))
        partition = [base + (1 if i < extra else 0) for i in range(len(tags))]
    if len(partition) != len(tags) or sum(partition) != num_env_groups:
        raise ValueError(f"num_groups_partition {partition} must have one entry per tag {tags} and sum to num_env_groups={num_env_groups}")
    return [tag for tag, count in zip(tags, partition) for _ in range(count)]


def group_seed(seed: int, mode: str, step: int, index: int) -> int:
    """The env seed of a step's index-th group of episodes (all of a group's envs share it)."""
    if mode == "val":
        return (seed * 1_000_003 + VAL_SEED_OFFSET + index) % 2**31
    return (seed * 1_000_003 + step * 100_003 + index) % 2**31


class SeedNumbering:
    """The seeds of one step's tasks, in the order they are launched. A task's seed index is its own
    number, or with seeds_per_tag the count of its tag's earlier tasks, so every tag plays the same
    seeds. The scheduler and the map-blind baselines (which replay a run's maps) both number with it."""

    def __init__(self, group_tags: list[str], seeds_per_tag: bool, seed: int, mode: str, step: int):
        self.group_tags, self.seeds_per_tag = group_tags, seeds_per_tag
        self.seed, self.mode, self.step = seed, mode, step
        self.tag_tasks: Counter = Counter()

    def seed_of(self, task: int, group: int) -> int:
        """Numbers task (run on group); call once per task, in task order."""
        tag = self.group_tags[group]
        index = self.tag_tasks[tag] if self.seeds_per_tag else task
        self.tag_tasks[tag] += 1
        return group_seed(self.seed, self.mode, self.step, index)


def round_robin_by_tag(group_tags: list[str]) -> list[int]:
    """Group indices ordered so consecutive groups cycle through the tags (tag mix for any n)."""
    queues: dict[str, list[int]] = {}
    for g, tag in enumerate(group_tags):
        queues.setdefault(tag, []).append(g)
    order: list[int] = []
    while any(queues.values()):
        for q in queues.values():
            if q:
                order.append(q.pop(0))
    return order


class RolloutScheduler:
    def __init__(self, env_manager_config: EnvManagerConfig, custom_envs: dict[str, CustomEnvConfig],
                 sequence_length: int, seed: int, tokenizer_path: str, infer: Any = None,
                 proxy: dict[str, Any] | None = None, mode: str = "train", executor: str = "ray",
                 generation_timeout_s: float | None = 600.0, max_failures: int | None = None, worker_threads: int = 1,
                 generating_args: GeneratingArgs | None = None) -> None:
        """infer: the inference workers (a roll Cluster of InferWorkers, Ray actor handles, or local
        InferWorkers); proxy: an LLM proxy spec instead ({"type": "random"} / {"type": "openai", …}).
        generating_args: the sampling used when `env_manager_config.generating_args` is None (pass
        actor_infer's); with neither, GeneratingArgs' own defaults."""
        if mode not in ("train", "val"):
            raise ValueError(f"mode must be 'train' or 'val', got {mode!r}")
        if executor not in ("ray", "local"):
            raise ValueError(f"executor must be 'ray' or 'local', got {executor!r}")
        cfg = dataclasses.replace(env_manager_config,
                                  generating_args=env_manager_config.generating_args or generating_args or GeneratingArgs())
        self.group_size, self.mode, self.seed, self.executor = cfg.group_size, mode, seed, executor
        missing = [t for t in cfg.tags if t not in custom_envs]
        if missing:
            raise ValueError(f"env manager tags {missing} are not in custom_envs (has {sorted(custom_envs)})")
        self.group_tags = split_groups(cfg.num_env_groups, list(cfg.tags), cfg.num_groups_partition)
        self.group_order = round_robin_by_tag(self.group_tags)
        self.max_failures = max_failures
        self.on_progress: Callable[[int, int, int], None] | None = None  # (episodes done, total, tokens generated)
        self.max_traj_per_env = cfg.max_traj_per_env
        self.seeds_per_tag = cfg.seeds_per_tag
        # a roll Cluster whose ranks Ray restarts: generation lost with a rank is re-run once it is restored
        self.infer_cluster = infer if getattr(infer, "max_restarts", 0) else None
        if proxy is None:
            workers = getattr(infer, "hosts", infer)  # a roll Cluster: talk to its hosts
            if not workers:
                raise ValueError("RolloutScheduler needs inference workers (infer=...) or an LLM proxy spec (proxy=...)")
            proxy = {"type": "policy", "workers": list(workers), "timeout_s": generation_timeout_s}
            remote = [hasattr(getattr(w, "call", getattr(w, "generate", None)), "remote") for w in workers]
            if executor == "ray" and not all(remote):
                raise ValueError("in-process inference workers cannot be shared with Ray env workers; "
                                 "use executor='local' for the rollout, or Ray actors for inference")
        from transformers import AutoTokenizer

        self.pad_token_id = AutoTokenizer.from_pretrained(tokenizer_path).pad_token_id or 0
        slots = [EnvSlot(env_id=g * self.group_size + i, tag=tag, env_config=custom_envs[tag])
                 for g, tag in enumerate(self.group_tags) for i in range(self.group_size)]
        per_worker = cfg.max_env_num_per_worker or len(slots)
        chunks = [slots[i : i + per_worker] for i in range(0, len(slots), per_worker)]
        common = dict(manager_config=cfg, tokenizer_path=str(tokenizer_path), proxy_spec=proxy,
                      sequence_length=sequence_length, num_threads=worker_threads)
        self.pool = EnvWorkerPool(chunks, common, executor, max_restarts=cfg.max_worker_restarts)

    @property
    def workers(self) -> list[Any]:
        """The EnvironmentWorkers (Ray actor handles, or the objects themselves with executor='local')."""
        return self.pool.workers

    def _launch(self, group: int, seed: int, key: str) -> list[cf.Future]:
        return [self.pool.submit(group * self.group_size + i, seed, key) for i in range(self.group_size)]

    def get_batch(self, n: int, step: int) -> Batch:
        """n episodes (whole groups) as a Batch of their samples (one per episode for the
        trajectory-wise manager); rollout metrics in `batch.info`."""
        if n <= 0 or n % self.group_size:
            raise ValueError(f"batch size {n} must be a positive multiple of group_size={self.group_size}")
        start = time.perf_counter()
        restarts_before = self.pool.restarts
        infer_restarts = 0
        need = n // self.group_size
        num_groups = len(self.group_tags)
        if self.max_traj_per_env > 0 and need > num_groups * self.max_traj_per_env:
            raise ValueError(f"batch of {n} needs {math.ceil(need / num_groups)} episodes per env, over "
                             f"max_traj_per_env={self.max_traj_per_env}; add env groups or lower the batch size")
        max_failures = self.max_failures if self.max_failures is not None else 2 * need + 4
        # (task, group): task k runs on group group_order[k % num_groups]; SeedNumbering gives its seed
        pending = [(k, self.group_order[k % num_groups]) for k in range(need)]
        numbering = SeedNumbering(self.group_tags, self.seeds_per_tag, self.seed, self.mode, step)
        task_seed = {task: numbering.seed_of(task, group) for task, group in pending}
        busy: dict[int, tuple[int, int, list[cf.Future]]] = {}  # group -> (task, seed, futures)
        waiting: dict[cf.Future, int] = {}
        done_groups: list[tuple[int, list[Trajectory]]] = []
        failures: Counter = Counter()
        failed_groups = 0
        timed_out_workers: set[int] = set()  # workers that may still run an env call that timed out
        next_task = need
        generated_so_far = 0
        if self.on_progress is not None:
            self.on_progress(0, need * self.group_size, 0)
        while len(done_groups) < need:
            for task, group in list(pending):
                if group in busy:
                    continue
                pending.remove((task, group))
                seed = task_seed[task]
                futures = self._launch(group, seed, f"{self.mode}{step}-t{task}")
                busy[group] = (task, seed, futures)
                waiting.update({f: group for f in futures})
            finished, _ = cf.wait(list(waiting), return_when=cf.FIRST_COMPLETED)
            for f in finished:
                waiting.pop(f)
            for group, (task, seed, futures) in list(busy.items()):
                if not all(f.done() for f in futures):
                    continue
                del busy[group]
                results = [_result_of(f, self.group_tags[group], seed, group * self.group_size + i)
                           for i, f in enumerate(futures)]
                bad = [r for r in results if isinstance(r, EpisodeFailureResult)]
                if not bad:
                    group_id = f"{self.mode}{step}-g{task}"
                    for i, samples in enumerate(results):
                        for sample in samples:
                            sample.traj_group_id, sample.traj_id = group_id, f"{group_id}-{i}"
                    done_groups.append((task, [sample for samples in results for sample in samples]))
                    if self.on_progress is not None:
                        generated_so_far += sum(sample.generated_tokens for sample in done_groups[-1][1])
                        self.on_progress(len(done_groups) * self.group_size, need * self.group_size, generated_so_far)
                    continue
                failed_groups += 1
                for r in bad:
                    if self.infer_cluster is not None and r.kind == "generation_error" and _lost_with_worker(r.detail):
                        r.kind = "infer_worker_died"
                        infer_restarts += self.infer_cluster.recover()
                    failures[r.kind] += 1
                    if r.kind == "env_timeout":
                        timed_out_workers.add(self.pool.worker_index_of_env[r.env_id])
                    if r.kind == "worker_died":
                        self.pool.recover(r.env_id)
                    logger.warning("rollout: %s in env tag=%s seed=%s (%s); the group is re-run with a new seed",
                                   r.kind, r.tag, r.env_seed, r.detail)
                # a dead worker's episodes are bounded by its restarts (recover raises), not by max_failures
                if sum(v for k, v in failures.items() if k not in ("worker_died", "infer_worker_died")) > max_failures:
                    raise RuntimeError(f"rollout: {sum(failures.values())} failed episodes (over max_failures={max_failures}): "
                                       f"{dict(failures)}; last: {bad[-1]}")
                # the replacement runs on the same group (same tag) with a seed no other task uses
                pending.append((next_task, group))
                task_seed[next_task] = numbering.seed_of(next_task, group)
                next_task += 1
        # every episode of the batch is back: a worker still running a hung env call can be ended now
        hang_replacements = self.pool.replace_hung(timed_out_workers)
        # task order, not finishing order: the same seeds give the same batch layout every time
        trajs = [t for _, g in sorted(done_groups, key=lambda item: item[0]) for t in g]
        batch = trajectories_to_batch(trajs, self.pad_token_id)
        elapsed = time.perf_counter() - start
        generated = sum(t.generated_tokens for t in trajs)
        prefix = "val/env" if self.mode == "val" else "env"
        batch.info.update(rollout_metrics(trajs, prefix=prefix))
        batch.info.update({
            "rollout/failures": float(sum(failures.values())),
            "rollout/infra_failed_rate": sum(failures.values()) / ((need + failed_groups) * self.group_size),
            **{f"rollout/failures/{k}": float(v) for k, v in failures.items()},
            "rollout/env_worker_restarts": float(self.pool.restarts - restarts_before),
            "rollout/env_worker_hang_replacements": float(hang_replacements),
            "rollout/infer_worker_restarts": float(infer_restarts),
            "rollout/num_actions": sum(t.env_metrics.get("num_actions", 0.0) for t in one_per_episode(trajs)),
            "rollout/generated_tokens": float(generated),
            "rollout/generated_tokens_per_s": generated / max(elapsed, 1e-9),
            "time/rollout": elapsed,
        })
        return batch

    def shutdown(self) -> None:
        self.pool.shutdown()


def _result_of(future: cf.Future, tag: str, seed: int, env_id: int) -> list[Trajectory] | EpisodeFailureResult:
    """An episode's result; a lost call counts as that episode's failure, `worker_died` when the
    worker's process died under it (the pool then waits for its replacement)."""
    try:
        return future.result()
    except Exception as exc:
        kind = "worker_died" if _is_actor_death(exc) else "worker_error"
        return EpisodeFailureResult(kind, tag, seed, f"{type(exc).__name__}: {exc}", env_id=env_id)


def _lost_with_worker(detail: str) -> bool:
    """Whether a generation failed because its inference worker died or is restarting (Ray's errors, or
    the restarted worker's refusal until it has the current weights)."""
    return any(name in detail for name in ("ActorDiedError", "ActorUnavailableError", "RayActorError", "WorkerNotRestored"))


def _is_actor_death(exc: Exception) -> bool:
    try:
        from ray.exceptions import RayActorError
    except ImportError:  # the local executor runs without Ray
        return False
    return isinstance(exc, RayActorError)
