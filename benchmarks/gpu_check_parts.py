"""The checks of benchmarks/gpu_check.py, one function each; every one returns table rows.

Each check builds what it needs from the model folder and a `Setup` (sizes for the device), runs
roll's own code (ActorWorker with hf_train / fsdp2_train, HFInferStrategy and its decode engine, the
memory estimate, checkpoints) and measures it. No Ray: workers are built in this process, one rank.
"""

from __future__ import annotations

import gc
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from transformers import AutoConfig

from roll.configs.agentic_config import AgenticConfig
from roll.configs.worker_config import ModelArgs, StrategyArgs, TrainingArgs, WorkerConfig
from roll.data.batch import Batch
from roll.launch.memory_estimate import check_memory, infer_estimate, model_facts, trainer_estimate
from roll.strategies.generation import GenerationRequest, SamplingParams
from roll.strategies.hf_infer import HFInferStrategy
from roll.workers.actor_worker import ActorWorker
from roll.workers.train_worker import LossConfig

MIB = 2**20
# bf16 against fp32 log-probs of the same weights, over response tokens, in nats
BF16_MEAN_TOL, BF16_MAX_TOL = 0.05, 0.5
# the decode engine's recorded log-probs against a fresh forward pass, both bf16 (fp32 on CPU: 1e-4)
ENGINE_TOL = {"cuda": 0.1, "cpu": 1e-4}


@dataclass
class Row:
    check: str
    result: str
    bound: str = ""
    ok: bool | None = None  # None: a measurement with no pass/fail


@dataclass
class Setup:
    """Sizes of one run: `lengths` of the training batch's samples (`prompt` tokens of each are the
    prompt), the micro-batch token budget, engine requests and turns."""

    device: str
    lengths: list[int]
    prompt: int
    budget: int
    learning_rate: float
    train_steps: int
    requests: int
    request_prompt: int
    new_tokens: int
    sessions: int
    turns: int
    peak_flops: float  # the card's bf16 peak (or the matmul rate measured here on CPU), FLOP/s
    peak_name: str


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def make_batch(setup: Setup, vocab: int, seed: int = 0) -> Batch:
    """Right-padded random ids; advantages +1 on the response, so each PPO step raises its log-probs."""
    g = torch.Generator().manual_seed(seed)
    n, width = len(setup.lengths), max(setup.lengths)
    mask = (torch.arange(width)[None, :] < torch.tensor(setup.lengths)[:, None]).long()
    ids = torch.randint(5, vocab, (n, width), generator=g) * mask
    response = mask.clone()
    response[:, : setup.prompt] = 0
    return Batch({"input_ids": ids, "attention_mask": mask, "position_ids": torch.arange(width).expand(n, width) * mask,
                  "response_mask": response, "advantages": response.float()})


def worker_config(model_dir: Path, strategy: str, dtype: str, setup: Setup, packing: bool = False) -> WorkerConfig:
    budget = setup.budget
    return WorkerConfig(
        model_args=ModelArgs(model_name_or_path=str(model_dir), dtype=dtype),
        training_args=TrainingArgs(learning_rate=setup.learning_rate, per_device_train_batch_size=len(setup.lengths)),
        strategy_args=StrategyArgs(strategy_name=strategy),
        use_dynamic_batching_in_train=not packing, max_tokens_per_microbatch_in_train=budget, sequence_length_round_in_train=8,
        use_dynamic_batching_in_infer=not packing, max_tokens_per_microbatch_in_infer=budget, sequence_length_round_in_infer=8,
        use_sequence_packing=packing,
        sequence_packing_args={"max_packed_sequence_length_train": budget, "max_packed_sequence_length_forward": budget},
    )


def response_logprobs(worker: ActorWorker, batch: Batch) -> torch.Tensor:
    """The log-probs of the batch's response tokens, flat (fp32)."""
    logprobs = worker.compute_log_probs(batch, response_only=True).tensors["logprobs"]
    return logprobs[batch.tensors["response_mask"] != 0].float()


def free(device: str) -> None:
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


def peak_reset(device: str) -> int:
    """Starts a peak measurement; returns the bytes allocated now (CUDA), 0 on CPU."""
    free(device)
    if device != "cuda":
        return 0
    torch.cuda.reset_peak_memory_stats()
    return torch.cuda.memory_allocated()


def peak_bytes(device: str, start: int) -> float | None:
    return torch.cuda.max_memory_allocated() - start if device == "cuda" else None


def fp32_reference(model_dir: Path, setup: Setup, batch: Batch) -> torch.Tensor:
    worker = ActorWorker(worker_config(model_dir, "hf_train", "fp32", setup))
    try:
        return response_logprobs(worker, batch)
    finally:
        worker.shutdown()
        del worker
        free(setup.device)


def matmul_params(model_dir: Path) -> int:
    """Parameters that take part in a matrix product per token (the output layer included, the
    embedding lookup not): 6 × this × tokens is a training step's FLOPs (attention scores aside)."""
    facts = model_facts(str(model_dir))
    tied = bool(getattr(AutoConfig.from_pretrained(model_dir), "tie_word_embeddings", False))
    return facts.params - (0 if tied else facts.vocab * facts.hidden)


def check_training(model_dir: Path, strategy: str, setup: Setup, reference: torch.Tensor | None) -> list[Row]:
    """bf16 PPO steps on one fixed batch with dynamic batching, then with packing: the response NLL
    falls, bf16 log-probs stay near fp32's, tokens/s and MFU, and the peak against the estimate."""
    batch = make_batch(setup, vocab=model_facts(str(model_dir)).vocab)
    config = worker_config(model_dir, strategy, "bf16", setup)
    start = peak_reset(setup.device)
    worker = ActorWorker(config)
    rows = []
    try:
        before = response_logprobs(worker, batch)
        diff = (before - reference).abs() if reference is not None else torch.full((1,), float("nan"))
        rows.append(Row(f"{strategy}: bf16 vs fp32 log-probs", f"mean {diff.mean():.4f}, max {diff.max():.4f} nats",
                        f"mean <= {BF16_MEAN_TOL}, max <= {BF16_MAX_TOL}",
                        bool(diff.mean() <= BF16_MEAN_TOL and diff.max() <= BF16_MAX_TOL)))
        loss_cfg = LossConfig(mini_batch_size=len(batch), shuffle=False, max_grad_norm=1.0)
        tokens = int(batch.tensors["attention_mask"].sum())
        flops = 6 * matmul_params(model_dir) * tokens
        for layout in ("dynamic batching", "packing"):
            if layout == "packing":
                dynamic = response_logprobs(worker, batch)
                worker.config = worker_config(model_dir, strategy, "bf16", setup, packing=True)
                packed = response_logprobs(worker, batch)
                gap = (packed - dynamic).abs()
                rows.append(Row(f"{strategy}: packed vs dynamic log-probs", f"max {gap.max():.4f} nats",
                                f"<= {BF16_MAX_TOL}", bool(gap.max() <= BF16_MAX_TOL)))
            times = []
            for _ in range(setup.train_steps):
                sync(setup.device)
                t0 = time.perf_counter()
                metrics = worker.train_step(batch, loss_cfg)
                sync(setup.device)
                times.append(time.perf_counter() - t0)
            step_s = min(times[1:]) if len(times) > 1 else times[0]  # the first step warms up kernels and AdamW's state
            rows.append(Row(f"{strategy}: train step, {layout}", f"{tokens / step_s:,.0f} tokens/s, MFU "
                            f"{flops / step_s / setup.peak_flops:.1%} of {setup.peak_name}",
                            f"{tokens} tokens, {step_s:.3f} s, grad norm {metrics['actor/grad_norm']:.2f}"))
        after = response_logprobs(worker, batch)
        nll0, nll1 = float(-before.mean()), float(-after.mean())
        rows.append(Row(f"{strategy}: response NLL over {2 * setup.train_steps} steps", f"{nll0:.3f} -> {nll1:.3f}",
                        "falls", nll1 < nll0))
        rows.append(memory_row(f"{strategy}: training peak vs estimate", setup, start,
                               trainer_estimate("actor_train", config, model_facts(str(model_dir)), max(setup.lengths))))
    finally:
        worker.shutdown()
        del worker
        free(setup.device)
    return rows


def check_offload(model_dir: Path, setup: Setup) -> list[Row]:
    """fsdp2_train with `offload_policy: true`: sharded state in (pinned) CPU memory, each layer copied to
    the device for its compute, AdamW on the CPU; two PPO steps raise the response log-probs."""
    batch = make_batch(setup, vocab=model_facts(str(model_dir)).vocab, seed=2).index(torch.arange(4))
    config = worker_config(model_dir, "fsdp2_train", "bf16", setup)
    config.strategy_args.strategy_config = {"offload_policy": True}
    worker = ActorWorker(config)
    try:
        where = {p.device.type for p in worker.strategy.model.parameters()}
        before = response_logprobs(worker, batch)
        sync(setup.device)
        t0 = time.perf_counter()
        for _ in range(2):
            worker.train_step(batch, LossConfig(mini_batch_size=len(batch), shuffle=False))
        sync(setup.device)
        step_s = (time.perf_counter() - t0) / 2
        after = response_logprobs(worker, batch)
    finally:
        worker.shutdown()
        del worker
        free(setup.device)
    nll0, nll1 = float(-before.mean()), float(-after.mean())
    return [Row("fsdp2_train offload_policy: 2 steps", f"NLL {nll0:.3f} -> {nll1:.3f}, {step_s:.2f} s/step, "
                f"parameters on {sorted(where)}", "NLL falls, parameters on cpu", nll1 < nll0 and where == {"cpu"})]


def memory_row(name: str, setup: Setup, start: int, estimate) -> Row:
    """Measured peak (torch.cuda.max_memory_allocated since `start`) against the estimate; within
    0.5–1.25× passes (an estimate may be generous, it must not be far short)."""
    measured = peak_bytes(setup.device, start)
    est = estimate.per_worker
    parts = ", ".join(f"{k} {v / MIB:,.1f}" for k, v in estimate.parts.items())
    if measured is None:
        return Row(name, f"estimate {est / MIB:,.1f} MiB; measured: CUDA only", f"estimate MiB: {parts}")
    ratio = measured / est
    return Row(name, f"measured {measured / MIB:,.0f} MiB, estimate {est / MIB:,.0f} MiB ({ratio:.2f}x)",
               f"0.5x-1.25x; estimate MiB: {parts}", 0.5 <= ratio <= 1.25)


def check_checkpoint(model_dir: Path, setup: Setup) -> list[Row]:
    """fsdp2_train: step, save, step (A); a fresh worker loads the save and steps (B): A == B bit for bit."""
    batch = make_batch(setup, vocab=model_facts(str(model_dir)).vocab, seed=1)
    config = worker_config(model_dir, "fsdp2_train", "bf16", setup)
    loss_cfg = LossConfig(mini_batch_size=len(batch), shuffle=False)
    deterministic = torch.are_deterministic_algorithms_enabled()
    # The question is whether the checkpoint holds the whole state, not whether the kernels are
    # deterministic: ask for deterministic ones (attention through sdpa's math backend, whose
    # backward has no atomics), so that any difference is the checkpoint's.
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        with tempfile.TemporaryDirectory() as folder, sdpa_kernel(SDPBackend.MATH):
            worker = ActorWorker(config)
            worker.train_step(batch, loss_cfg)
            worker.save_checkpoint(folder)
            worker.train_step(batch, loss_cfg)
            straight = worker.get_state_dict()
            worker.shutdown()
            del worker
            free(setup.device)
            resumed_worker = ActorWorker(config)
            resumed_worker.load_checkpoint(folder)
            resumed_worker.train_step(batch, loss_cfg)
            resumed = resumed_worker.get_state_dict()
            resumed_worker.shutdown()
            del resumed_worker
            hf_files = sorted(p.name for p in Path(folder).glob("*.safetensors"))
    finally:
        torch.use_deterministic_algorithms(deterministic)
        free(setup.device)
    worst = max(float((straight[k].float() - resumed[k].float()).abs().max()) for k in straight)
    return [Row("fsdp2_train: save, load, next step", f"max abs(resumed - straight) = {worst:g} over {len(straight)} tensors",
                f"0 (bit-identical; deterministic kernels); HF files {hf_files}", worst == 0.0 and bool(hf_files))]


def run_config(model_dir: Path, setup: Setup, infer_dtype: str, engine_budget: dict) -> AgenticConfig:
    """A run's config as the launcher's memory check sees it: actor_train as check_training's fsdp2_train
    worker, actor_infer as check_decode_engine's engine (its budget given explicitly), GRPO (no critic)."""
    config = AgenticConfig(sequence_length=max(setup.lengths), adv_estimator="grpo")
    config.actor_train = worker_config(model_dir, "fsdp2_train", "bf16", setup)
    config.actor_infer.model_args.model_name_or_path = str(model_dir)
    config.actor_infer.model_args.dtype = infer_dtype
    config.actor_infer.strategy_args.strategy_config = dict(engine_budget)
    return config


def check_memory_branch(model_dir: Path, setup: Setup) -> list[Row]:
    """The launcher's memory check (roll/launch/memory_estimate.py check_memory) on this machine: on
    CUDA every worker against the device's memory, on CPU the roles' sum against RAM."""
    config = run_config(model_dir, setup, "bf16", {"max_num_seqs": 64, "max_model_len": 4096})
    cuda = setup.device == "cuda"
    roles = check_memory(config, cuda=cuda)
    where = f"{torch.cuda.get_device_properties(0).total_memory / 2**30:.1f} GiB device" if cuda else "RAM"
    return [Row(f"memory check ({'GPU' if cuda else 'CPU'} branch)", "fits: " + "; ".join(
        f"{r.role} {r.per_worker / 2**30:.2f} GiB" for r in roles), f"each worker vs {where}" if cuda else where, True)]


def sampling(setup: Setup, greedy: bool = True, seed: int | None = None) -> SamplingParams:
    if greedy:
        return SamplingParams(max_new_tokens=setup.new_tokens, do_sample=False, temperature=0.0, top_p=1.0, top_k=0)
    return SamplingParams(max_new_tokens=setup.new_tokens, do_sample=True, temperature=1.0, top_p=0.9, top_k=50, seed=seed)


def check_decode_engine(model_dir: Path, setup: Setup, vocab: int) -> list[Row]:
    """hf_infer on the device: multi-turn sessions whose recorded log-probs a fresh forward pass
    reproduces, generated tokens/s against HF generate on the same requests, memory vs estimate."""
    dtype = "bf16" if setup.device == "cuda" else "fp32"
    max_len = setup.request_prompt + setup.turns * (setup.new_tokens + 8) + setup.new_tokens
    start = peak_reset(setup.device)
    engine = HFInferStrategy(model_dir, dtype=dtype, device=setup.device, max_sessions=max(setup.requests, setup.sessions),
                             max_model_len=max_len, max_batch_size=max(setup.requests, setup.sessions))
    g = torch.Generator().manual_seed(3)
    rows = []
    try:
        prompts = [torch.randint(5, vocab, (setup.request_prompt,), generator=g).tolist() for _ in range(setup.requests)]
        engine.generate([GenerationRequest(prompts[0][:8], sampling(setup))])  # warm-up
        sync(setup.device)
        t0 = time.perf_counter()
        results = engine.generate([GenerationRequest(p, sampling(setup)) for p in prompts])
        sync(setup.device)
        engine_s = time.perf_counter() - t0
        engine_tokens = sum(len(r.output_ids) for r in results)
        sampled = engine.generate([GenerationRequest(prompts[0], sampling(setup, greedy=False, seed=7))] * 2)
        rows.append(Row("hf_infer: seeded sampling on the device", f"{len(sampled[0].output_ids)} tokens, "
                        f"same seed same tokens: {sampled[0].output_ids == sampled[1].output_ids}", "same tokens",
                        sampled[0].output_ids == sampled[1].output_ids))
        # the engine's own peak, before the checks below make full-vocabulary logits of their own
        config = run_config(model_dir, setup, dtype, engine.budget.__dict__)
        rows.append(memory_row("hf_infer: engine peak vs estimate", setup, start,
                               infer_estimate(config, model_facts(str(model_dir)))))
        rows.append(multi_turn_row(engine, setup, g, vocab, dtype))
        hf_tokens, hf_s = hf_generate(engine, prompts, setup)
        rows.append(Row("hf_infer: decode engine vs HF generate", f"{engine_tokens / engine_s:,.0f} vs "
                        f"{hf_tokens / hf_s:,.0f} tokens/s ({engine_tokens / engine_s / (hf_tokens / hf_s):.2f}x)",
                        f"{setup.requests} requests x {setup.request_prompt} prompt + {setup.new_tokens} new, greedy"))
    finally:
        engine.shutdown()
        del engine
        free(setup.device)
    return rows


def multi_turn_row(engine: HFInferStrategy, setup: Setup, g: torch.Generator, vocab: int, dtype: str) -> Row:
    """`sessions` episodes of `turns` turns: each turn's prompt is the last prompt + its output + 8 new
    observation tokens (the session's cache is reused); then one fresh forward over each whole episode."""
    prompts = [torch.randint(5, vocab, (setup.request_prompt // 2,), generator=g).tolist() for _ in range(setup.sessions)]
    recorded: list[list[tuple[int, int, float]]] = [[] for _ in prompts]  # (position, token, log-prob)
    cached = 0
    for _ in range(setup.turns):
        results = engine.generate([GenerationRequest(p, sampling(setup), session_id=f"episode-{i}")
                                   for i, p in enumerate(prompts)])
        for i, r in enumerate(results):
            recorded[i] += [(len(prompts[i]) + j, t, lp) for j, (t, lp) in enumerate(zip(r.output_ids, r.logprobs))]
            cached += r.cached_tokens
            prompts[i] = prompts[i] + r.output_ids + torch.randint(5, vocab, (8,), generator=g).tolist()
    worst = 0.0
    with torch.no_grad():
        for i, marks in enumerate(recorded):
            ids = torch.tensor([prompts[i]], device=engine.model.device)
            logp = torch.log_softmax(engine.model(input_ids=ids).logits.float()[0], dim=-1)
            for position, token, lp in marks:
                worst = max(worst, abs(float(logp[position - 1, token]) - lp))
    tol = ENGINE_TOL[setup.device]
    return Row(f"hf_infer: {setup.turns}-turn sessions, recorded vs fresh log-probs ({dtype})",
               f"max abs diff {worst:.2g} over {sum(map(len, recorded))} tokens; {cached} prompt tokens from the cache",
               f"<= {tol}, cache reused", worst <= tol and cached > 0)


def hf_generate(engine: HFInferStrategy, prompts: list[list[int]], setup: Setup) -> tuple[int, float]:
    """transformers' generate on the same prompts (one batch; equal lengths, so no padding): tokens
    up to and including each row's first eos, and seconds."""
    model = engine.model
    ids = torch.tensor(prompts, device=model.device)
    eos = set(engine.engine.eos)
    kwargs = dict(attention_mask=torch.ones_like(ids), max_new_tokens=setup.new_tokens, do_sample=False,
                  pad_token_id=engine.tokenizer.pad_token_id, eos_token_id=sorted(eos))
    with torch.no_grad():
        model.generate(ids[:, :8], **{**kwargs, "attention_mask": torch.ones_like(ids[:, :8]), "max_new_tokens": 4})
        sync(setup.device)
        t0 = time.perf_counter()
        out = model.generate(ids, **kwargs)
        sync(setup.device)
        seconds = time.perf_counter() - t0
    tokens = 0
    for row in out[:, ids.shape[1]:].tolist():
        ends = [j for j, t in enumerate(row) if t in eos]
        tokens += ends[0] + 1 if ends else len(row)
    return tokens, seconds

