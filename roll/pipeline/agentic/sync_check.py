"""Verified weight sync: after every weight update each inference rank proves it holds the trainer's
weights, by a checksum per weight computed on both sides (roll/utils/weight_checksum.py).

The trainer's checksums are taken when the weights are sent (synchronous training) or published
(async training, where the trainer moves on before the rollout thread loads them), cast to the
inference dtype; each inference rank compares them with its own after loading. A difference raises
`WeightSyncMismatch` naming the tensor and both checksums. `verify_weight_sync: false` turns it off.

Metrics per step: `sync/verified` (1 once the weights the inference workers hold were checked; a check
that fails stops the run, so it never reads 1 for unchecked weights) and `time/sync_verify_s` (seconds
spent checksumming on both sides since the previous step's metrics). A resumed async run reads 0 on
the steps whose batches its checkpoint held (checked by the run that made them) until its first load.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from roll.utils.weight_checksum import WeightSyncMismatch


class SyncVerifier:
    def __init__(self, actor_train: Any, actor_infer: Any, infer_dtype: str) -> None:
        self.actor_train, self.actor_infer, self.infer_dtype = actor_train, actor_infer, infer_dtype
        self._lock = threading.Lock()  # async training verifies in the rollout thread
        self._verified = False  # the weights the inference workers hold were checked
        self._seconds = 0.0

    def trainer_checksums(self) -> dict[str, int]:
        """The checksums of actor_train's current weights, as the inference engine should hold them."""
        start = time.perf_counter()
        checksums = self.actor_train.execute_rank0("weight_checksums", self.infer_dtype)
        self._add_time(time.perf_counter() - start)
        return checksums

    def verify(self, expected: dict[str, int], version: int, rank: int | None = None) -> None:
        """Raises WeightSyncMismatch when an inference rank (every rank, or only `rank`) holds other weights."""
        start = time.perf_counter()
        if rank is None:
            results = list(enumerate(self.actor_infer.execute_all("verify_weights", expected)))
        else:
            results = [(rank, self.actor_infer.execute_on(rank, "verify_weights", expected))]
        self._add_time(time.perf_counter() - start)
        for infer_rank, mismatches in results:
            if mismatches:
                raise WeightSyncMismatch(version, infer_rank, mismatches)
        with self._lock:
            self._verified = True

    def take_metrics(self) -> dict[str, float]:
        """This step's metrics; the time counts again from 0 for the next step."""
        with self._lock:
            metrics = {"sync/verified": 1.0 if self._verified else 0.0, "time/sync_verify_s": self._seconds}
            self._seconds = 0.0
        return metrics

    def _add_time(self, seconds: float) -> None:
        with self._lock:
            self._seconds += seconds
