"""Asynchronous training (`async_generation_ratio: k ≥ 1`): the training rollout runs in a background
thread, up to k weight versions ahead of the trainer (ROLL's meaning of the ratio).

Versions: the weights the trainer starts step s from are version s (the pipeline publishes them with
`publish(s, weights)` at the start of step s). A sample's `weight_version` is the oldest version that
generated any of its tokens, and its staleness when step s trains on it is s − weight_version.

The rules:
- Gate: the rollout for step s starts only once version s − k is published, so with k = 1 the rollout
  for step s + 1 runs while step s trains. Nothing is ever generated further ahead than that.
- Exact versions: the batch of step s is generated with version max(s − k, first step of the run),
  never a newer one that happens to be published already, so which weights made a batch does not
  depend on timing: the same run makes the same batches, and a resumed run can make them again.
- Weight syncs happen between rollout batches only: before each batch the rollout thread loads that
  batch's version into the inference workers. An episode in flight when the trainer publishes new
  weights is committed: it finishes with the weights it started with (ROLL's other choice, aborting
  it, would waste its tokens), so every sample of a batch carries that batch's one version.
- Lossless resume: a checkpoint written after step r holds the weights of version r + 1, but the
  batches of steps r + 1 … r + k are made with versions r + 1 − k … r, which no checkpoint holds. So
  they are saved with it (`batches_ahead`: the checkpoint waits until they are made) and handed back to
  the resumed run (`ready_batches`), whose rollout thread goes on from step r + k + 1 with version
  r + 1. No episode is skipped or trained twice, and on CPU the resumed run trains the same batches to
  the same weights as the run that was not interrupted (tests/pipeline/test_async_resume.py).
- Staleness bound: when step s takes its batch, every GRPO group holding a sample with staleness > k is
  dropped (never trained on) and counted in `async/dropped_samples`. Samples with an unknown version
  (−1, an external LLM server) are kept and left out of the staleness statistics.
- Validation (`run_with_latest_weights`) holds the inference workers between two rollout batches and
  runs with the newest published weights.
- Every wait has a timeout (`async_wait_timeout_s`) and fails the run with what it waited for; an
  error in the rollout thread is raised in the trainer at its next `get_batch`.

Metrics (in batch.info): async/staleness_mean, async/staleness_max, async/dropped_samples,
time/trainer_wait_rollout (the trainer waiting for this step's batch), time/rollout_wait_weights (the
rollout waiting at the gate for the trainer's weights since the previous step), async/weight_syncs (loads
of new weights into the inference workers so far).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

from roll.data.batch import Batch

logger = logging.getLogger("roll.pipeline")
_JOIN_TIMEOUT_S = 30.0  # how long shutdown waits for the rollout thread to notice it was stopped


def drop_stale_groups(batch: Batch, step: int, ratio: int) -> tuple[Batch, dict[str, float]]:
    """The batch without the GRPO groups (traj_group_id) that hold a sample more than `ratio` versions
    older than `step`, and the staleness metrics of the samples kept."""
    # a batch dumped before samples carried versions (rollout_mock) has none: every version unknown
    versions = [int(v) for v in batch.meta.get("weight_version", [-1] * len(batch))]
    groups = batch.meta["traj_group_id"]
    stale_groups = {g for g, v in zip(groups, versions) if v >= 0 and step - v > ratio}
    keep = [i for i, g in enumerate(groups) if g not in stale_groups]
    if len(keep) < len(batch):
        batch = batch.index(keep)
    known = [step - versions[i] for i in keep if versions[i] >= 0]
    return batch, {
        "async/dropped_samples": float(len(versions) - len(keep)),
        "async/staleness_mean": sum(known) / len(known) if known else 0.0,
        "async/staleness_max": float(max(known)) if known else 0.0,
    }


class AsyncRollout:
    """The train rollout (anything with `get_batch(n, step)`) run ahead of the trainer; the pipeline
    calls `publish` at the start of every step and `get_batch` for the step's batch."""

    def __init__(self, rollout: Any, push_weights: Callable[[Any, int], None], ratio: int, batch_size: int,
                 first_step: int, last_step: int, timeout_s: float, ready_batches: dict[int, Batch] | None = None) -> None:
        """ready_batches: batches made before a checkpoint for the steps after it (a resumed run)."""
        self.rollout, self.push_weights = rollout, push_weights
        self.ratio, self.batch_size, self.timeout_s = int(ratio), batch_size, timeout_s
        self.first_step, self.last_step = first_step, last_step
        self._ready: dict[int, Batch] = dict(ready_batches or {})  # made and not yet trained on, by step
        self.next_step = first_step + len(self._ready)  # the rollout thread's first step
        self._published: dict[int, Any] = {}  # version -> weights, from the oldest a batch still needs
        self._infer_version: int | None = None  # the version the inference workers hold
        self._changed = threading.Condition()
        self._infer_lock = threading.Lock()  # held while a rollout batch or a validation uses the workers
        self._error: tuple[int, BaseException] | None = None  # the rollout thread's failure and its step
        self._stop = threading.Event()
        self._syncs = 0
        self._wait_weights_s = 0.0
        self._thread: threading.Thread | None = None
        self._doing = "not running (no weights published yet)"  # what the rollout thread is doing, for timeout messages

    # --- trainer side ------------------------------------------------------------------------
    def publish(self, version: int, weights: Any) -> None:
        """The trainer's weights of `version` (an object-store reference); the rollout loads them before its next batch."""
        with self._changed:
            self._published[version] = weights
            self._changed.notify_all()
        if self._thread is None and version >= self.first_step:  # not for a warm-up's validation at version 0
            self._doing = "starting"
            self._thread = threading.Thread(target=self._produce, name="async-rollout", daemon=True)
            self._thread.start()

    def get_batch(self, size: int, step: int) -> Batch:
        """Step `step`'s batch, without the groups staler than the ratio; metrics in batch.info."""
        if size != self.batch_size:
            raise ValueError(f"async rollout makes batches of {self.batch_size}, asked for {size}")
        start = time.perf_counter()
        item = self._wait_for_batches([step], "the trainer")[step]
        with self._changed:
            del self._ready[step]
        waited = time.perf_counter() - start
        batch, metrics = drop_stale_groups(item, step, self.ratio)
        if len(batch) == 0:
            raise RuntimeError(f"async training: every group of step {step}'s batch was staler than "
                               f"async_generation_ratio={self.ratio}")
        if metrics["async/dropped_samples"]:
            logger.warning("async training: step %d dropped %d samples older than %d versions",
                           step, int(metrics["async/dropped_samples"]), self.ratio)
        batch.info.update(metrics)
        batch.info.update({"time/trainer_wait_rollout": waited, "time/rollout_wait_weights": self._wait_weights_s,
                           "async/weight_syncs": float(self._syncs)})
        self._wait_weights_s = 0.0
        return batch

    def batches_ahead(self, step_done: int) -> dict[int, Batch]:
        """For a checkpoint written after step `step_done`: the batches of the next k steps, which were
        made with weights older than the checkpoint's (it waits until they are made)."""
        steps = list(range(step_done + 1, min(step_done + self.ratio, self.last_step) + 1))
        return self._wait_for_batches(steps, "the checkpoint")

    def _wait_for_batches(self, steps: list[int], who: str) -> dict[int, Batch]:
        with self._changed:
            ready = self._changed.wait_for(lambda: self._error is not None or all(s in self._ready for s in steps),
                                           timeout=self.timeout_s)
            if self._error is not None and not all(s in self._ready for s in steps):
                failed_step, error = self._error
                raise RuntimeError(f"async training: the rollout for step {failed_step} failed: {error}") from error
            if not ready:
                raise TimeoutError(f"async training: {who} waited {self.timeout_s:.0f}s (async_wait_timeout_s) for "
                                   f"the rollout batch of step {min(s for s in steps if s not in self._ready)}; "
                                   f"the rollout thread is {self._doing}")
            return {s: self._ready[s] for s in steps}

    def run_with_latest_weights(self, work: Callable[[], Any]) -> Any:
        """`work()` (a validation rollout) between two rollout batches, with the newest published weights."""
        if not self._infer_lock.acquire(timeout=self.timeout_s):
            raise TimeoutError(f"async training: waited {self.timeout_s:.0f}s (async_wait_timeout_s) for the "
                               "running rollout batch to finish before validating")
        try:
            with self._changed:
                latest = max(self._published)
            self._load(latest)
            return work()
        finally:
            self._infer_lock.release()

    def shutdown(self) -> None:
        """Stops the rollout thread: its gate wait ends at once; a batch in flight fails when the env
        workers it waits on are shut down (the thread is a daemon, so a hung call cannot keep the process)."""
        self._stop.set()
        with self._changed:
            self._changed.notify_all()
        self.rollout.shutdown()
        if self._thread is not None:
            self._thread.join(timeout=_JOIN_TIMEOUT_S)

    # --- rollout side ------------------------------------------------------------------------
    def _produce(self) -> None:
        step = self.next_step
        try:
            while step <= self.last_step and not self._stop.is_set():
                self._doing = f"waiting for the trainer's weights of version {step - self.ratio} to start step {step}"
                version = max(step - self.ratio, self.first_step)
                self._wait_for_version(version)
                if self._stop.is_set():
                    break
                self._doing = f"generating the batch of step {step}"
                with self._infer_lock:
                    self._load(version)
                    batch = self.rollout.get_batch(self.batch_size, step)
                with self._changed:
                    self._ready[step] = batch
                    for old in [v for v in self._published if v < version]:  # no later batch needs them
                        del self._published[old]
                    self._changed.notify_all()
                step += 1
            self._doing = f"finished (it ran up to step {step - 1})"
        except BaseException as error:  # handed to the trainer, which raises it with the step
            self._doing = f"stopped by an error at step {step}: {error}"
            with self._changed:
                self._error = (step, error)
                self._changed.notify_all()

    def _wait_for_version(self, version: int) -> None:
        start = time.perf_counter()
        with self._changed:
            ready = self._changed.wait_for(lambda: self._stop.is_set() or version in self._published,
                                           timeout=self.timeout_s)
        self._wait_weights_s += time.perf_counter() - start
        if not ready:
            have = max(self._published) if self._published else None
            raise TimeoutError(f"the rollout waited {self.timeout_s:.0f}s (async_wait_timeout_s) for the trainer's "
                               f"weights of version {version} (it has published {have})")

    def _load(self, version: int) -> None:
        """Puts the published weights of `version` into the inference workers, unless they hold them."""
        with self._changed:
            weights = self._published[version]
        if version != self._infer_version:
            self.push_weights(weights, version)
            self._infer_version = version
            self._syncs += 1
