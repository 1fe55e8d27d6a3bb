"""A Cluster: the workers of one role (actor_train, critic, reference, actor_infer), one per rank.

The driver calls every rank with the same arguments (`execute_all`), rank 0 alone (`execute_rank0`),
or splits a batch across the data-parallel ranks and gathers the results in order (`dispatch_batch`).
Two executors share this interface: "ray" (one Ray actor per rank: real processes, GPUs, several
nodes) and "local" (the same worker objects in this process: a debugger and fast tests see everything).

Methods that all ranks of a sharded model must join (gathering an FSDP state dict, saving) carry the
`@collective` mark; `execute_rank0` runs those on every rank and returns rank 0's answer, so the
driver never has to know which strategy a role uses.
"""

from __future__ import annotations

import inspect
import logging
import os
import time
from typing import Any, Callable

import torch

from roll.configs.worker_config import WorkerConfig
from roll.data.batch import Batch
from roll.strategies.registry import strategy_facts
from roll.utils.memory import release_free_memory
from roll.utils.rendezvous import free_address

EXECUTORS = ("ray", "local")
logger = logging.getLogger(__name__)
# The once-a-step methods that allocate and free the most (batches, activations, state dicts): after
# them a worker gives freed heap memory back to the system, so its resident size does not stay at
# its largest step's (roll/utils/memory.py). Never after `generate`: it runs many times per step.
RELEASE_MEMORY_AFTER = frozenset({"train_step", "compute_log_probs", "compute_values", "update_weights",
                                  "load_weights", "get_state_dict", "save_checkpoint", "load_checkpoint",
                                  "sft_step", "end_sft_warmup"})


def collective(method: Callable) -> Callable:
    """Marks a worker method that every rank must run together (see the module docstring)."""
    method._roll_collective = True
    return method


def replayed_on_restart(method: Callable) -> Callable:
    """Marks a worker method whose latest call (with its arguments) a restarted worker must get again
    before it serves anything else: the weights of an inference worker (see Cluster.recover)."""
    method._roll_replayed = True
    return method


def restores_state(method: Callable) -> Callable:
    """Marks a worker method a restarted worker may serve before Cluster.recover has finished: what a
    Cluster's `restore_hook` calls to give it state too big to record (weights streamed in buckets).
    Unlike @replayed_on_restart, its calls are not recorded."""
    method._roll_restores = True
    return method


class WorkerNotRestored(RuntimeError):
    """A restarted worker was called before Cluster.recover gave it back its state."""


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _restarted_by_ray() -> bool:
    import ray

    return ray.is_initialized() and ray.get_runtime_context().was_current_actor_reconstructed


class WorkerHost:
    """Holds one worker. Ray makes it an actor; the local executor uses it as it is."""

    def __init__(self, num_threads: int, start_args: tuple | None = None) -> None:
        # Workers of one role run at the same time, so each takes its share of the cores: more
        # threads than cores makes every matmul slower, several-fold on a small machine.
        torch.set_num_threads(num_threads)
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        self.worker: Any = None
        self.restored = True
        if start_args is not None:  # a restartable host: Ray runs this constructor again in a new process
            self.start(*start_args)
            self.restored = not _restarted_by_ray()

    def status(self) -> tuple[int, bool]:
        """(pid, whether the worker holds its state: False in a restarted process until `restore`)."""
        return os.getpid(), self.restored

    def mark_restored(self) -> None:
        """Cluster.recover has replayed the worker's state: it may serve every call again."""
        self.restored = True

    def address(self) -> tuple[str, int]:
        return free_address()

    def start(self, worker_cls: type, worker_config: WorkerConfig, rank: int, world_size: int, kwargs: dict) -> None:
        self.worker = worker_cls(worker_config, rank, world_size, **kwargs)

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        fn = getattr(type(self.worker), method, None)
        if not self.restored and method != "shutdown" and not (getattr(fn, "_roll_replayed", False)
                                                               or getattr(fn, "_roll_restores", False)):
            raise WorkerNotRestored(f"this {type(self.worker).__name__} was restarted and has not got its state back "
                                    f"yet (Cluster.recover); {method} must wait")
        try:
            return getattr(self.worker, method)(*args, **kwargs)
        finally:
            if method in RELEASE_MEMORY_AFTER:
                release_free_memory()


class Cluster:
    def __init__(
        self,
        name: str,
        worker_cls: type,
        worker_config: WorkerConfig,
        num_workers: int | None = None,
        executor: str = "ray",
        threads_per_worker: int | None = None,
        num_gpus_per_worker: float | None = None,
        max_restarts: int = 0,
        ray_options: dict[str, Any] | None = None,
        **worker_kwargs: Any,
    ) -> None:
        """max_restarts: times Ray may restart each rank's process after it died (kill -9, OOM); the
        restarted worker gets the latest call of each @replayed_on_restart method from `recover()`, then
        `restore_hook(rank)` when set (state too big to record: its owner sends it again). Only for
        workers without a process group (inference): ranks of one group cannot rejoin it.
        ray_options: Ray actor options over the worker class's RAY_ACTOR_OPTIONS (e.g. max_concurrency)."""
        if executor not in EXECUTORS:
            raise ValueError(f"executor must be one of {EXECUTORS}, got {executor!r}")
        self.name, self.worker_cls, self.executor = name, worker_cls, executor
        self.num_workers = num_workers or worker_config.num_workers
        strategy = worker_config.strategy_args.strategy_name
        if executor == "local" and self.num_workers > 1 and strategy_facts(strategy).sharded:
            raise ValueError(
                f"cluster {name!r}: {strategy} with {self.num_workers} ranks needs one process per rank; "
                "use executor='ray' (the local executor runs workers one after another in this process)"
            )
        threads = threads_per_worker or max(1, cpu_count() // self.num_workers)
        self.max_restarts, self.restarts = max_restarts, 0
        self.ray_options = {**getattr(worker_cls, "RAY_ACTOR_OPTIONS", {}), **(ray_options or {})}
        self._replay: dict[str, tuple[str, tuple, dict]] = {}  # method -> its latest call, for restarted ranks
        self.restore_hook: Callable[[int], None] | None = None
        kwargs = dict(worker_kwargs)
        if max_restarts:
            if "dist_addr" in inspect.signature(worker_cls.__init__).parameters or executor != "ray":
                raise ValueError(f"cluster {name!r}: max_restarts needs Ray and a worker without a process group")
            self.hosts = self._make_hosts(threads, num_gpus_per_worker, [
                (worker_cls, worker_config, r, self.num_workers, kwargs) for r in range(self.num_workers)])
            self._log_pids()
            return
        self.hosts = self._make_hosts(threads, num_gpus_per_worker)
        if "dist_addr" in inspect.signature(worker_cls.__init__).parameters and "dist_addr" not in kwargs:
            kwargs["dist_addr"] = self._get(self._call_host(self.hosts[0], "address"))
        # All ranks start together: torch.distributed's rendezvous waits for every one of them.
        self._get_all([self._call_host(h, "start", worker_cls, worker_config, r, self.num_workers, kwargs)
                       for r, h in enumerate(self.hosts)])
        self._log_pids()

    def _log_pids(self) -> None:
        """Which process is which role (to read `top`, an OOM-killer line, or to kill one on purpose)."""
        pids = [pid for pid, _ in self._get_all([self._call_host(h, "status") for h in self.hosts])]
        logger.info("cluster %s: ranks' pids %s", self.name, pids)

    def _make_hosts(self, threads: int, num_gpus: float | None, start_args: list[tuple] | None = None) -> list:
        if self.executor == "local":
            return [WorkerHost(threads) for _ in range(self.num_workers)]
        import ray

        if not ray.is_initialized():
            raise RuntimeError(f"cluster {self.name!r}: start Ray first (ray.init) or use executor='local'")
        options = dict(self.ray_options)
        if num_gpus is None:
            num_gpus = 1 if ray.cluster_resources().get("GPU", 0) > 0 else 0
        # CPU workers reserve no Ray CPUs: roles take turns on the same cores (threads are shared out above).
        options.update(num_cpus=0, num_gpus=num_gpus)
        actor_cls = ray.remote(WorkerHost)
        if start_args is None:
            return [actor_cls.options(**options).remote(threads) for _ in range(self.num_workers)]
        # max_task_retries=0: calls in flight when a rank dies fail (their callers re-run them, e.g. an
        # episode's group) rather than replaying on a process that has not got its state back
        options.update(max_restarts=self.max_restarts, max_task_retries=0)
        return [actor_cls.options(**options).remote(threads, args) for args in start_args]

    # --- calling ----------------------------------------------------------------------------------
    def _call_host(self, host: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        if self.executor == "local":
            return getattr(host, method)(*args, **kwargs)
        return getattr(host, method).remote(*args, **kwargs)

    def _get(self, ref: Any) -> Any:
        return self._get_all([ref])[0]

    def _get_all(self, refs: list) -> list:
        if self.executor == "local":
            return refs
        import ray

        return ray.get(refs)

    def _is_collective(self, method: str) -> bool:
        fn = getattr(self.worker_cls, method, None)
        if fn is None:
            raise AttributeError(f"{self.worker_cls.__name__} has no method {method!r} (cluster {self.name!r})")
        return bool(getattr(fn, "_roll_collective", False))

    def execute_all(self, method: str, *args: Any, **kwargs: Any) -> list:
        """`method(*args, **kwargs)` on every rank; results in rank order."""
        self._is_collective(method)
        if self.max_restarts and getattr(getattr(self.worker_cls, method), "_roll_replayed", False):
            self._replay[method] = (method, args, kwargs)  # holds Ray's reference: the object stays stored
        return self._get_all([self._call_host(h, "call", method, *args, **kwargs) for h in self.hosts])

    def execute_rank0(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Rank 0's result; a @collective method runs on every rank (they must join) and rank 0 answers."""
        return self._get(self.execute_rank0_ref(method, *args, **kwargs))

    def execute_on(self, rank: int, method: str, *args: Any, **kwargs: Any) -> Any:
        """`method(*args, **kwargs)` on one rank (not for @collective methods: the other ranks would not join)."""
        if self._is_collective(method) and self.num_workers > 1:
            raise ValueError(f"cluster {self.name!r}: {method} is collective; call it on every rank")
        return self._get(self._call_host(self.hosts[rank], "call", method, *args, **kwargs))

    def execute_rank0_ref(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Like execute_rank0, but with the ray executor the answer stays in Ray's object store: pass the
        reference on to other actors (weights to the inference workers) without a copy through the driver."""
        if self._is_collective(method) and self.num_workers > 1:
            refs = [self._call_host(h, "call", method, *args, **kwargs) for h in self.hosts]
            self._get_all(refs[1:])  # the other ranks only take part; wait so they are done
            return refs[0]
        return self._call_host(self.hosts[0], "call", method, *args, **kwargs)

    def dispatch_batch(self, method: str, batch: Batch, **kwargs: Any) -> Batch | list:
        """Splits `batch` into num_workers consecutive chunks, calls `method(chunk, **kwargs)` on each rank
        and returns the results joined in order: one Batch when workers return batches (log-probs,
        values), else the list of per-rank results (train_step metrics, already reduced over ranks)."""
        if len(batch) < self.num_workers:
            raise ValueError(
                f"cluster {self.name!r}: a batch of {len(batch)} samples cannot feed {self.num_workers} ranks; "
                "make rollout_batch_size at least the number of workers"
            )
        self._is_collective(method)
        chunks = batch.chunk(self.num_workers)
        results = self._get_all([self._call_host(h, "call", method, c, **kwargs) for h, c in zip(self.hosts, chunks)])
        if all(isinstance(r, Batch) for r in results):
            return Batch.cat(results)
        return results

    def recover(self, timeout_s: float = 300.0) -> int:
        """Waits for ranks that Ray is restarting and gives each restarted rank the latest call of every
        @replayed_on_restart method (the current weights); returns how many ranks it restored. Raises
        when a rank is gone for good (its restarts used up)."""
        import ray

        restored = 0
        for rank, host in enumerate(self.hosts):
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    restored += self._restore(host, rank, deadline)
                    break
                except ray.exceptions.ActorUnavailableError:
                    # restarting, or restarted once more while its state was replayed (killed again,
                    # e.g. by the OOM killer): wait for the new process and replay to it from the start
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"cluster {self.name!r}: rank {rank} was not restarted in {timeout_s:.0f} s") from None
                    time.sleep(0.5)
                except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as exc:
                    raise RuntimeError(f"cluster {self.name!r}: rank {rank} died and was not restarted (it may be "
                                       f"restarted {self.max_restarts} times per run): {exc}") from exc
        self.restarts += restored
        return restored

    def _restore(self, host: Any, rank: int, deadline: float) -> int:
        """1 when `host` is a restarted process and got the latest call of each replayed method (and the
        restore hook's state), 0 when it holds its state already."""
        import ray

        _, ok = ray.get(host.status.remote(), timeout=max(1.0, deadline - time.monotonic()))
        if ok:
            return 0
        for method, args, kwargs in self._replay.values():  # Ray resolves references given as direct
            ray.get(host.call.remote(method, *args, **kwargs))  # arguments: the weights arrive as tensors
        if self.restore_hook is not None:
            self.restore_hook(rank)
        ray.get(host.mark_restored.remote())
        return 1

    def shutdown(self) -> None:
        """Closes each worker (process groups, engines) and ends the Ray actors."""
        if not self.hosts:
            return
        if hasattr(self.worker_cls, "shutdown"):
            try:
                self.execute_all("shutdown")
            finally:
                self._kill()
        else:
            self._kill()

    def _kill(self) -> None:
        if self.executor == "ray":
            import ray

            for host in self.hosts:
                ray.kill(host)
        self.hosts = []
