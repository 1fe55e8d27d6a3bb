"""The policy proxy: requests go to our inference workers. A worker may be a local InferWorker (or
anything with `generate`/`release`), a Ray actor handle of one, or a host of roll's Cluster (which
forwards `call(method, ...)` to the worker it holds, locally or as a Ray actor)."""

from __future__ import annotations

from typing import Any

from roll.strategies.generation import GenerationRequest, GenerationResult


class PolicyProxy:
    def __init__(self, workers: list[Any], index: int = 0, timeout_s: float | None = None) -> None:
        if not workers:
            raise ValueError("the policy proxy needs at least one inference worker")
        # one env manager always talks to the same worker: its episode's KV cache lives there
        self.worker = workers[index % len(workers)]
        self.via_host = hasattr(self.worker, "call")
        entry = self.worker.call if self.via_host else self.worker.generate
        self.is_ray = hasattr(entry, "remote")
        self.timeout_s = timeout_s

    def _invoke(self, method: str, *args: Any, wait: bool = True) -> Any:
        if self.via_host:
            fn, args = self.worker.call, (method, *args)
        else:
            fn = getattr(self.worker, method)
        if not self.is_ray:
            return fn(*args)
        ref = fn.remote(*args)
        if not wait:
            return None  # fire and forget
        import ray

        return ray.get(ref, timeout=self.timeout_s)

    def generate(self, request: GenerationRequest) -> GenerationResult:
        return self._invoke("generate", [request])[0]

    def release(self, session_id: str) -> None:
        self._invoke("release", [session_id], wait=False)
