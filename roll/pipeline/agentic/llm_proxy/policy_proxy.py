"""The policy proxy: requests go to our inference workers (Ray actor handles or local InferWorkers)."""

from __future__ import annotations

from typing import Any


class PolicyProxy:
    def __init__(self, workers: list[Any], index: int = 0, timeout_s: float | None = None) -> None:
        if not workers:
            raise ValueError("the policy proxy needs at least one inference worker")
        # one env manager always talks to the same worker: its episode's KV cache lives there
        self.worker = workers[index % len(workers)]
        self.is_ray = hasattr(self.worker.generate, "remote")
        self.timeout_s = timeout_s

    def generate(self, request: dict) -> dict:
        if self.is_ray:
            import ray

            return ray.get(self.worker.generate.remote([request]), timeout=self.timeout_s)[0]
        return self.worker.generate([request])[0]

    def release(self, session_id: str) -> None:
        if self.is_ray:
            self.worker.release.remote([session_id])  # fire and forget: nothing to wait for
        else:
            self.worker.release([session_id])
