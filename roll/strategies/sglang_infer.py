"""`sglang`: generation with SGLang's offline engine, behind the same contract as `hf_infer` / `vllm`.

SGLang runs its scheduler (continuous batching, radix prefix cache) in its own process and needs a
CUDA GPU: its CPU engine requires Intel AMX, and its wheels need torch 2.14 with CUDA packages. So
on a machine without CUDA this strategy is refused before any worker starts
(the facts table, roll/strategies/registry.py) with the alternative, `vllm` or `hf_infer`.

The engine's Python front end is bound to the event loop it was created on, so one owner thread
creates it and makes every call: concurrent `generate` callers queue their requests, and the owner
sends everything waiting as one batch (token ids in, `return_logprob` for the sampled tokens' log-probs)
while SGLang's scheduler batches and caches across them. This path has not run yet: it needs a GPU
machine with SGLang installed (tests/rollout/test_sglang.py checks the refusal here).
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable

import torch

from roll.strategies.generation import GenerationRequest, GenerationResult, SamplingParams, refuse_images
from roll.strategies.registry import strategy_problem

DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def sglang_unavailable_reason() -> str | None:
    """Why SGLang cannot run here (with the alternative); None when it can (the strategy facts table)."""
    return strategy_problem("sglang", torch.cuda.is_available())


def sampling_params(sampling: SamplingParams) -> dict[str, Any]:
    """SGLang's sampling-parameter dict for roll's (already checked) sampling parameters."""
    greedy = sampling.greedy
    params: dict[str, Any] = {
        "max_new_tokens": sampling.max_new_tokens,
        "temperature": 0.0 if greedy else sampling.temperature,
        "top_p": 1.0 if greedy else sampling.top_p,
        "top_k": -1 if greedy or not sampling.top_k else sampling.top_k,
        "skip_special_tokens": False,
    }
    if sampling.stop_strings:
        params["stop"] = list(sampling.stop_strings)
    if not greedy and sampling.seed is not None:
        params["sampling_seed"] = sampling.seed % 2**31
    return params


def to_result(request: GenerationRequest, out: dict, weight_version: int) -> GenerationResult:
    meta = out["meta_info"]
    finish = (meta.get("finish_reason") or {}).get("type")
    if finish not in ("stop", "length"):
        raise RuntimeError(f"SGLang ended request {request.request_id!r} with finish reason {finish!r}")
    cached = int(meta.get("cached_tokens", 0))
    return GenerationResult(
        request_id=request.request_id,
        output_ids=list(out["output_ids"]),
        logprobs=[float(entry[0]) for entry in meta["output_token_logprobs"]],
        finish_reason=finish,
        prefilled_tokens=len(request.input_ids) - cached,
        cached_tokens=cached,
        weight_version=weight_version,
    )


class SGLangInferStrategy:
    def __init__(self, model_path: str | Path, dtype: str = "bf16", strategy_config: dict[str, Any] | None = None,
                 seed: int = 0, **_unused: Any) -> None:
        reason = sglang_unavailable_reason()
        if reason:
            raise RuntimeError(f"strategy_name: sglang: {reason}")
        config = dict(strategy_config or {})
        # ROLL's configs name vLLM's keys; SGLang's equivalents where there is one
        if "gpu_memory_utilization" in config:
            config["mem_fraction_static"] = config.pop("gpu_memory_utilization")
        if "block_size" in config:
            config["page_size"] = config.pop("block_size")
        if config.get("load_format") == "auto":
            del config["load_format"]
        self.weight_version = 0
        self.stats = {"prefill_tokens": 0, "cached_tokens": 0, "decode_tokens": 0, "requests": 0}
        self._jobs: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._own, args=(str(model_path), DTYPES[dtype], seed, config),
                                        name="sglang-owner", daemon=True)
        self._thread.start()
        self._call(lambda engine: None)  # waits for the engine (or raises its start-up error)

    def _own(self, model_path: str, dtype: str, seed: int, config: dict) -> None:
        engine, error = None, None
        try:
            import sglang

            engine = sglang.Engine(model_path=model_path, dtype=dtype, random_seed=seed, **config)
        except Exception as exc:  # reported to every caller
            error = exc
        while True:
            job = self._jobs.get()
            if job is None:
                break
            batch = [job] + [self._jobs.get_nowait() for _ in range(self._jobs.qsize())]
            stop = None in batch
            jobs = [j for j in batch if j is not None]
            self._run(engine, error, jobs)
            if stop:
                break
        if engine is not None:
            engine.shutdown()

    def _run(self, engine: Any, error: Exception | None, jobs: list) -> None:
        """Runs the queued calls (weight updates), then every queued request as one batch."""
        for kind, fn, future in jobs:
            if kind != "call":
                continue
            try:
                if error is not None:
                    raise error
                future.set_result(fn(engine))
            except Exception as exc:
                future.set_exception(exc)
        gens = [j for j in jobs if j[0] == "generate"]
        if not gens:
            return
        requests = [r for _, reqs, _ in gens for r in reqs]
        try:
            if error is not None:
                raise error
            outs = engine.generate(input_ids=[[int(t) for t in r.input_ids] for r in requests],
                                   sampling_params=[sampling_params(r.sampling) for r in requests], return_logprob=True)
            results = [to_result(r, o, self.weight_version) for r, o in zip(requests, outs)]
        except Exception as exc:
            for _, _, future in gens:
                future.set_exception(exc)
            return
        for res in results:
            self.stats["requests"] += 1
            self.stats["cached_tokens"] += res.cached_tokens
            self.stats["prefill_tokens"] += res.prefilled_tokens
            self.stats["decode_tokens"] += len(res.output_ids)
        start = 0
        for _, reqs, future in gens:
            future.set_result(results[start:start + len(reqs)])
            start += len(reqs)

    def _call(self, fn: Callable[[Any], Any]) -> Any:
        future: Future = Future()
        self._jobs.put(("call", fn, future))
        return future.result()

    def generate(self, requests: list[GenerationRequest], timeout: float | None = None) -> list[GenerationResult]:
        refuse_images(requests, "sglang")
        future: Future = Future()
        self._jobs.put(("generate", requests, future))
        return future.result(timeout)

    def release(self, session_ids: list[str]) -> None:
        """Nothing to free: SGLang's radix cache is keyed by content."""

    def load_state_dict(self, state_dict: dict[str, torch.Tensor], version: int) -> None:
        named = [(name, tensor.detach()) for name, tensor in state_dict.items()]
        self._call(lambda engine: engine.update_weights_from_tensor(named_tensors=named, flush_cache=True))
        self.weight_version = version

    def shutdown(self) -> None:
        self._jobs.put(None)
        self._thread.join(timeout=60)
