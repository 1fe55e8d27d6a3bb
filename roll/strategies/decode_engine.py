"""Continuous-batching decode engine: many sessions, one model, exact token ids and log-probs.

Requests are `GenerationRequest`s (roll/strategies/generation.py): the whole prompt as token ids,
an optional session id, and `SamplingParams` checked when they were built. Results are
`GenerationResult`s.

A session (one episode) keeps its slot of the KV cache between turns: when its next prompt extends
what the slot holds, only the new tokens are prefilled. Every loop iteration admits waiting requests
(their new tokens prefilled together, within a token budget), then runs one decode step for every
running sequence, so a request that arrives mid-flight joins at the next step and never waits for
a whole batch to finish. `logprobs` are the model's raw log-softmax at the chosen token (before
temperature / top-k / top-p), which is what the trainer recomputes.

Memory is bounded by design: the KV cache holds `max_sessions` slots of `max_model_len` tokens,
allocated once. A new session takes a free slot, else the least recently used idle one (finished
episodes first); when every slot is generating, the request waits for one (a running sequence ends
within its max_new_tokens steps, so the wait is bounded, and failing it would throw away an episode
for a condition that passes by itself). A request that could never fit a slot (prompt +
max_new_tokens over max_model_len) is refused at once with an error naming the key.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable

import torch

from roll.strategies.generation import GenerationRequest, GenerationResult, SamplingParams
from roll.strategies.hf_cache_forward import HFCacheForward
from roll.strategies.kv_forward import LeanForward, lean_forward_unsupported_reason
from roll.strategies.sampling import sample_tokens

logger = logging.getLogger(__name__)


@dataclass
class _Session:
    slot: int
    ids: list[int] = field(default_factory=list)  # tokens whose keys/values the slot holds
    busy: bool = False


@dataclass
class _Sequence:
    request: GenerationRequest
    session_id: str
    prompt: list[int]
    start: int  # first prompt position not in the cache
    output_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish_reason: str | None = None
    done: threading.Event = field(default_factory=threading.Event)
    generator: torch.Generator | None = None
    error: str | None = None  # why the engine aborted it


def finish_reason(output_ids: list[int], sampling: SamplingParams, eos: set[int],
                  decode_text: Callable[[list[int]], str]) -> str | None:
    """Why generation stops after the newest token: "stop" (an eos token, or a stop string in the decoded
    output), "length" (max_new_tokens reached), or None (it goes on)."""
    if output_ids[-1] in eos:
        return "stop"
    if sampling.stop_strings and any(stop in decode_text(output_ids) for stop in sampling.stop_strings):
        return "stop"
    return "length" if len(output_ids) >= sampling.max_new_tokens else None


MIN_SHARED_PREFIX = 16  # shorter shared prefixes are not worth a copy


class DecodeEngine:
    """Serves generation requests from many threads; call `start()` for the background loop, or drive
    it with `step()` from one thread."""

    def __init__(self, model: torch.nn.Module, eos_token_ids: list[int], decode_text: Callable[[list[int]], str],
                 max_batch_size: int = 64, max_prefill_tokens: int = 4096, max_sessions: int = 64,
                 max_model_len: int = 4096, seed: int = 0) -> None:
        model.eval()
        reason = lean_forward_unsupported_reason(model)
        if reason:
            logger.warning("hf_infer: %s; using the slower one-sequence-at-a-time transformers path", reason)
        self.forward = HFCacheForward(model) if reason else LeanForward(model)
        self.eos = set(int(t) for t in eos_token_ids)
        self.decode_text = decode_text
        self.max_batch_size, self.max_prefill_tokens, self.max_sessions = max_batch_size, max_prefill_tokens, max_sessions
        self.max_model_len = max_model_len
        self.seed = seed
        self.cache = self.forward.new_cache(slots=max_sessions, capacity=max_model_len)
        self.sessions: OrderedDict[str, _Session] = OrderedDict()  # least recently used first
        self.free_slots = list(range(max_sessions))
        self.waiting: list[_Sequence] = []
        self.running: list[_Sequence] = []
        self.lock = threading.Condition()
        self.weight_version = 0
        self.stats = {"prefill_tokens": 0, "cached_tokens": 0, "decode_tokens": 0, "prefill_s": 0.0, "decode_s": 0.0}
        self._anon = itertools.count()
        self._stale: set[str] = set()
        self._thread: threading.Thread | None = None
        self._stopping = False

    # ---- public API -------------------------------------------------------------------------------
    def submit(self, requests: list[GenerationRequest]) -> list[_Sequence]:
        seqs = []
        for req in requests:
            if not isinstance(req, GenerationRequest):
                raise TypeError(f"the decode engine takes GenerationRequest objects, got {type(req).__name__}")
            ids = [int(t) for t in req.input_ids]
            needed = len(ids) + req.sampling.max_new_tokens
            if needed > self.max_model_len:
                raise ValueError(
                    f"generation request {req.request_id!r} needs {len(ids)} prompt + {req.sampling.max_new_tokens} "
                    f"new tokens = {needed}, over the decode engine's max_model_len {self.max_model_len} (tokens per KV "
                    f"slot): raise actor_infer.strategy_args.strategy_config.max_model_len (default: sequence_length) "
                    f"or shorten the prompt / max_new_tokens")
            sid = req.session_id or f"__anon_{next(self._anon)}"
            gen = None
            if not req.sampling.greedy:
                seed = req.sampling.seed if req.sampling.seed is not None else self.seed + len(ids)
                gen = torch.Generator().manual_seed(int(seed))
            seqs.append(_Sequence(request=req, session_id=sid, prompt=ids, start=0, generator=gen))
        with self.lock:
            self.waiting.extend(seqs)
            self.lock.notify_all()
        return seqs

    def generate(self, requests: list[GenerationRequest], timeout: float | None = None) -> list[GenerationResult]:
        """Blocks until every request is done. Thread-safe; concurrent callers share decode steps."""
        seqs = self.submit(requests)
        if self._thread is None:
            while not all(s.done.is_set() for s in seqs):
                self.step()
        for s in seqs:
            if not s.done.wait(timeout):
                raise TimeoutError(f"generation of {s.request.request_id!r} took over {timeout}s")
        return [self._result(s) for s in seqs]

    def release(self, session_ids: list[str]) -> None:
        """Marks finished episodes: their slots are the first to be reused, and until then their
        keys/values still serve as shared prefixes for new episodes."""
        with self.lock:
            for sid in session_ids:
                sess = self.sessions.get(sid)
                if sess is not None and not sess.busy:
                    del self.sessions[sid]
                    retired = f"__retired_{next(self._anon)}"
                    self.sessions[retired] = sess
                    self.sessions.move_to_end(retired, last=False)  # evicted first

    def reset_cache(self, weight_version: int | None = None) -> None:
        """Drops every idle session's cache (after a weight update the stored keys/values are stale)."""
        with self.lock:
            for sid, sess in list(self.sessions.items()):
                if sess.busy:
                    self._stale.add(sid)  # mid-generation: dropped when it finishes
                else:
                    self.free_slots.append(self.sessions.pop(sid).slot)
            if weight_version is not None:
                self.weight_version = weight_version

    def start(self) -> "DecodeEngine":
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="decode-engine", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        with self.lock:
            self._stopping = True
            self.lock.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    # ---- the loop ---------------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self.lock:
                while not self._stopping and not self.waiting and not self.running:
                    self.lock.wait()
                if self._stopping:
                    for s in self.waiting + self.running:
                        self._finish(s, "abort")
                    return
            try:
                self.step()
            except Exception as exc:  # a failed step must not hang callers: fail what was in flight
                with self.lock:
                    for s in self.running + self.waiting:
                        s.error = f"{type(exc).__name__}: {exc}"
                        self._finish(s, "abort")
                    self.running, self.waiting = [], []

    def step(self) -> None:
        """Admits waiting requests (prefill), then one decode step for all running sequences."""
        with self.lock:
            admitted = self._admit()
        if admitted:
            t0 = time.perf_counter()
            chunks = [(self.sessions[s.session_id].slot, s.start, s.prompt[s.start :]) for s in admitted]
            logits = self.forward.prefill(self.cache, chunks)
            self.stats["prefill_s"] += time.perf_counter() - t0
            self.stats["prefill_tokens"] += sum(len(c[2]) for c in chunks)
            with self.lock:
                for s in admitted:
                    self.sessions[s.session_id].ids = s.prompt
            self._append(admitted, logits)
        # every unfinished sequence feeds its newest token (newly admitted ones got theirs from prefill)
        fed = [s for s in self.running if s.finish_reason is None]
        if fed:
            t0 = time.perf_counter()
            slots = [self.sessions[s.session_id].slot for s in fed]
            positions = [len(s.prompt) + len(s.output_ids) - 1 for s in fed]
            logits = self.forward.decode(self.cache, slots, positions, [s.output_ids[-1] for s in fed])
            self.stats["decode_s"] += time.perf_counter() - t0
            self.stats["decode_tokens"] += len(fed)
            self._append(fed, logits)
        with self.lock:
            for s in [s for s in self.running if s.finish_reason is not None]:
                self._settle(s)
            self.running = [s for s in self.running if s.finish_reason is None]

    def _admit(self) -> list[_Sequence]:
        admitted, budget, keep = [], self.max_prefill_tokens, []
        for s in self.waiting:
            room = len(self.running) + len(admitted) < self.max_batch_size
            sess = self.sessions.get(s.session_id)
            if not room or (sess is not None and sess.busy):
                keep.append(s)
                continue
            own = common_prefix_length(sess.ids, s.prompt) if sess is not None else 0
            donor, shared = self._best_donor(s.prompt, exclude=s.session_id)
            donor_slot = self.sessions[donor].slot if donor is not None else -1  # before any eviction below
            # a prompt whose shared prefix is being prefilled this very step waits one step, then copies it
            in_flight = max((common_prefix_length(a.prompt, s.prompt) for a in admitted), default=0)
            if in_flight >= max(own, shared) + MIN_SHARED_PREFIX:
                keep.append(s)
                continue
            if sess is None:
                sess = self._new_session(s.session_id)
                if sess is None:  # every slot is busy: wait for one to finish
                    keep.append(s)
                    continue
            reuse = min(max(own, shared), len(s.prompt) - 1)  # the last prompt token must run for the first logits
            new = len(s.prompt) - reuse
            if admitted and new > budget:
                keep.append(s)
                continue
            budget -= new
            if shared > own and reuse > own:
                self._copy_prefix(donor_slot, sess.slot, reuse)
            s.start = reuse
            sess.busy, sess.ids = True, s.prompt[:reuse]
            self.sessions.move_to_end(s.session_id)
            self.stats["cached_tokens"] += reuse
            admitted.append(s)
        self.waiting = keep
        self.running.extend(admitted)
        return admitted

    def _best_donor(self, prompt: list[int], exclude: str) -> tuple[str | None, int]:
        """The session whose stored tokens share the longest prefix with `prompt` (prefix caching:
        envs of one task share the system prompt and instruction; a GRPO group shares the whole
        first prompt). Keys/values of a prefix do not depend on what follows, so a copy is exact."""
        best, best_len = None, 0
        for sid, sess in self.sessions.items():
            if sid != exclude and sess.ids and sess.ids[0] == prompt[0]:
                n = common_prefix_length(sess.ids, prompt)
                if n > best_len:
                    best, best_len = sid, n
        return best, (best_len if best_len >= MIN_SHARED_PREFIX else 0)

    def _copy_prefix(self, src: int, dst: int, length: int) -> None:
        self.cache.copy_prefix(src, dst, length)

    def _new_session(self, sid: str) -> _Session | None:
        """A slot for a new session, in this order: a free slot already in use before (its memory is
        resident), a finished episode's, a never-used one (resident memory grows only here, up to the
        budget), the least recently used idle episode's. None when every slot is generating (the
        request waits)."""
        self.free_slots.sort()  # low slots first keeps the decode span [lo, hi) tight
        slot = next((s for s in self.free_slots if s in self.cache.claimed), None)
        if slot is None:
            retired = next((k for k, v in self.sessions.items() if k.startswith("__retired_") and not v.busy), None)
            if retired is not None:
                self.free_slots.insert(0, self.sessions.pop(retired).slot)
            elif not self.free_slots:
                idle = next((k for k, v in self.sessions.items() if not v.busy), None)
                if idle is None:
                    return None
                self.free_slots.insert(0, self.sessions.pop(idle).slot)
            slot = self.free_slots[0]
        self.free_slots.remove(slot)
        self.cache.claim(slot)
        sess = _Session(slot=slot)
        self.sessions[sid] = sess
        return sess

    def _append(self, seqs: list[_Sequence], logits: torch.Tensor) -> None:
        params = [s.request.sampling for s in seqs]
        tokens, logps = sample_tokens(logits, params, [s.generator for s in seqs])
        for s, tok, lp in zip(seqs, tokens.tolist(), logps.tolist()):
            s.output_ids.append(tok)
            s.logprobs.append(lp)
            s.finish_reason = finish_reason(s.output_ids, s.request.sampling, self.eos, self.decode_text)

    def _settle(self, s: _Sequence) -> None:
        """The slot now holds prompt + all outputs but the last (which was sampled, never fed)."""
        sess = self.sessions[s.session_id]
        sess.ids = s.prompt + s.output_ids[:-1]
        sess.busy = False
        if s.session_id in self._stale:
            self._stale.discard(s.session_id)
            self.free_slots.append(self.sessions.pop(s.session_id).slot)
        elif s.session_id.startswith("__anon_"):
            self.release([s.session_id])
        s.done.set()

    def _finish(self, s: _Sequence, reason: str) -> None:
        s.finish_reason = reason
        sess = self.sessions.pop(s.session_id, None)
        if sess is not None:
            self.free_slots.append(sess.slot)  # its cache content is unknown now
        s.done.set()

    def _result(self, s: _Sequence) -> GenerationResult:
        if s.finish_reason == "abort":
            raise RuntimeError(f"generation of {s.request.request_id!r} was aborted: {s.error or 'engine stopped'}")
        return GenerationResult(
            request_id=s.request.request_id,
            output_ids=s.output_ids,
            logprobs=s.logprobs,
            finish_reason=s.finish_reason,
            prefilled_tokens=len(s.prompt) - s.start,
            cached_tokens=s.start,
            weight_version=self.weight_version,
        )


def common_prefix_length(a: list[int], b: list[int]) -> int:
    """Length of the common prefix, by bisection over C-speed slice comparisons."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo
