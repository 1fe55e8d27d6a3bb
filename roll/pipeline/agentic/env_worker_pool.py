"""EnvWorkerPool: the EnvironmentWorkers of one rollout, which env each hosts, and their recovery.

With the "ray" executor each worker is a Ray actor created with `max_restarts`: when its process dies
(kill -9, the OOM killer, a segfault in an env's native code) Ray starts a new process from the same
constructor arguments, so the replacement hosts the same env managers. `max_task_retries=0`: the
episodes that were running in the dead process fail (`worker_died`) instead of being replayed by Ray,
and the scheduler re-runs their groups with fresh seeds, like any failed episode. `recover(worker)`
waits until the replacement answers and counts it in `restarts`; a worker whose restarts are used up
raises, naming the worker and the key to raise.

An env call that hangs past `env_timeout_s` fails its episode, but its thread keeps running in the
worker (Python cannot kill a thread). `replace_hung(workers)`, called by the scheduler once a batch is
done (none of the pool's episodes are then in flight), asks those workers whether such a call still
runs and ends each one that answers yes, starting a fresh process from the same arguments in its place
(with a fresh `max_restarts`), counted in `hung_replacements`.

The "local" executor runs the workers in this process on threads; they cannot die on their own.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import time
from collections import Counter
from typing import Any

from roll.pipeline.agentic.environment_worker import EnvironmentWorker, EnvSlot

logger = logging.getLogger(__name__)
RESTART_WAIT_S = 300.0  # a replacement loads a tokenizer and builds its envs; under load that takes a while


class EnvWorkerPool:
    def __init__(self, chunks: list[list[EnvSlot]], worker_kwargs: dict[str, Any], executor: str = "ray",
                 max_restarts: int = 4) -> None:
        """chunks: the env slots of each worker; worker_kwargs: EnvironmentWorker's other arguments;
        max_restarts: how many times Ray may replace each worker's process during the run."""
        self.executor, self.max_restarts = executor, max_restarts
        self.restarts = 0  # replacements observed over the pool's life
        self.hung_replacements = 0  # processes ended because an env call in them never returned
        self._chunks, self._worker_kwargs = chunks, worker_kwargs
        if executor == "ray":
            import ray

            self._actor_cls = ray.remote(EnvironmentWorker)
            self._nodes = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
            self.workers = [self._start_actor(w) for w in range(len(chunks))]
            places = self._respread(ray.get([h.ready.remote() for h in self.workers]))
            self._threads = None
        else:
            self.workers = [EnvironmentWorker(w, chunk, **worker_kwargs) for w, chunk in enumerate(chunks)]
            places = [w.ready() for w in self.workers]
            self._threads = cf.ThreadPoolExecutor(max_workers=sum(len(c) for c in chunks), thread_name_prefix="env")
        self.worker_index_of_env = {slot.env_id: w for w, chunk in enumerate(chunks) for slot in chunk}
        self.pids = [place.pid for place in places]
        self.node_ids = [place.node_id for place in places]
        logger.info("env workers by node: %s", ", ".join(f"{node} x{n}" for node, n in Counter(self.node_ids).items()))

    def _node_of(self, index: int) -> str:
        # Worker i goes to node i mod (alive nodes), so on a cluster of several nodes the env workers (and
        # their envs' CPU work) are on all of them; Ray's SPREAD is best effort and put every worker on
        # one node of a freshly joined two-node cluster in a test.
        return self._nodes[index % len(self._nodes)]

    def _start_actor(self, index: int) -> Any:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        chunk = self._chunks[index]
        # soft: a node that is gone is skipped (a restart after its node died goes elsewhere).
        # num_cpus=0: env workers mostly wait; the cores belong to inference and training.
        node = NodeAffinitySchedulingStrategy(node_id=self._node_of(index), soft=True)
        return self._actor_cls.options(
            num_cpus=0, max_concurrency=len(chunk) + 2, max_restarts=self.max_restarts, max_task_retries=0,
            scheduling_strategy=node).remote(index, chunk, **self._worker_kwargs)

    def _respread(self, places: list[Any], tries: int = 6) -> list[Any]:
        """Starts again each worker that Ray put off its node while that node is alive, after waits of
        1, 2, 4 ... s: soft affinity falls back to another node when the scheduler has not yet seen the
        resources of a node that joined moments before (in CI, a two-node cluster started just before
        the run; on a loaded machine three 1 s waits were once not enough)."""
        import ray

        for attempt in range(tries):
            alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
            misplaced = [i for i, place in enumerate(places)
                         if place.node_id != self._node_of(i) and self._node_of(i) in alive]
            if not misplaced:
                break
            logger.info("env workers %s landed off their nodes; starting them again", misplaced)
            time.sleep(2.0 ** attempt)
            for i in misplaced:
                ray.kill(self.workers[i], no_restart=True)
                self.workers[i] = self._start_actor(i)
            for i, place in zip(misplaced, ray.get([self.workers[i].ready.remote() for i in misplaced])):
                places[i] = place
        return places

    def submit(self, env_id: int, seed: int, episode_key: str) -> cf.Future:
        """One episode of env `env_id` on the worker that hosts it."""
        worker = self.workers[self.worker_index_of_env[env_id]]
        if self._threads is None:
            return worker.run_episode.remote(env_id, seed, episode_key).future()
        return self._threads.submit(worker.run_episode, env_id, seed, episode_key)

    def recover(self, env_id: int) -> None:
        """After an episode of `env_id` was lost with its worker's process: wait for Ray's replacement
        (counted once per new process), or raise when the worker cannot come back."""
        import ray

        index = self.worker_index_of_env[env_id]
        deadline = time.monotonic() + RESTART_WAIT_S
        while True:
            try:
                place = ray.get(self.workers[index].ready.remote(), timeout=max(1.0, deadline - time.monotonic()))
                break
            except ray.exceptions.ActorUnavailableError:  # still restarting: Ray answers once the new process is up
                if time.monotonic() > deadline:
                    raise self._not_replaced(index, f"no replacement within {RESTART_WAIT_S:.0f} s") from None
                time.sleep(0.5)
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as exc:
                raise self._not_replaced(index, f"{type(exc).__name__}: {exc}") from exc
        if place.pid != self.pids[index]:
            self.restarts += 1
            logger.warning("rollout: env worker %d died (pid %d) and was replaced (pid %d on node %s); its episodes "
                           "are re-run with new seeds", index, self.pids[index], place.pid, place.node_id)
            self.pids[index], self.node_ids[index] = place.pid, place.node_id

    def replace_hung(self, indices: set[int]) -> int:
        """Ends each worker of `indices` that still runs an env call that timed out, and starts a fresh
        process in its place; returns how many were replaced. Call it only when none of the pool's
        episodes are in flight (the ended process takes its running episodes with it)."""
        if self._threads is not None or not indices:  # local executor: the driver process cannot be replaced
            return 0
        import ray

        order = sorted(indices)
        hung = ray.get([self.workers[i].hung_env_calls.remote() for i in order])
        replaced = [i for i, count in zip(order, hung) if count > 0]
        for i in replaced:
            ray.kill(self.workers[i], no_restart=True)
            self.workers[i] = self._start_actor(i)
        for i, place in zip(replaced, ray.get([self.workers[i].ready.remote() for i in replaced])):
            logger.warning("rollout: env worker %d (pid %d) held an env call that never returned; it was ended and "
                           "replaced (pid %d on node %s)", i, self.pids[i], place.pid, place.node_id)
            self.pids[i], self.node_ids[i] = place.pid, place.node_id
        self.hung_replacements += len(replaced)
        return len(replaced)

    def _not_replaced(self, index: int, reason: str) -> RuntimeError:
        return RuntimeError(f"rollout: env worker {index} died and was not replaced ({reason}); each worker may be "
                            f"restarted {self.max_restarts} times per run (env manager key max_worker_restarts)")

    def shutdown(self) -> None:
        if self._threads is None:
            import ray

            for h in self.workers:
                ray.kill(h, no_restart=True)
        else:
            self._threads.shutdown(wait=False, cancel_futures=True)
        self.workers = []
