"""Training throughput of the actor worker on SmolLM2-135M-Instruct: plain padding vs dynamic batching
vs sequence packing on a batch of mixed-length sequences (like multi-turn trajectories).

    .venv/bin/python benchmarks/train_throughput.py [--num-seqs 8 --min-len 100 --max-len 1000]
    .venv/bin/python benchmarks/train_throughput.py --strategies hf_train,fsdp2_train,deepspeed_train:2,deepspeed_train:3
    .venv/bin/python benchmarks/train_throughput.py --recompute-budget 2048   # + gradient checkpointing

`--strategies` compares training strategies (one process each, `deepspeed_train:N` = ZeRO stage N)
on the same batch with dynamic batching, instead of the layouts under hf_train.

One PPO train_step (one optimizer step over the whole batch) per layout, after a short warm-up.
"useful tokens/s" counts real tokens only (padding is waste); the FLOP limit is what the machine's
own fp32 matmul rate, measured in this run, allows: 6 × parameters × tokens per step (forward 2,
backward 4), so "% of limit" = useful tokens/s × 6 × params / matmul FLOP/s.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from roll.configs.worker_config import ModelArgs, StrategyArgs, TrainingArgs, WorkerConfig  # noqa: E402
from roll.data.batch import Batch  # noqa: E402
from roll.distributed import Cluster  # noqa: E402
from roll.workers.actor_worker import ActorWorker  # noqa: E402
from roll.workers.train_worker import LossConfig  # noqa: E402


def matmul_flops(size: int = 2048, repeats: int = 5) -> float:
    """Best fp32 matmul rate of this machine (FLOP/s) with the current torch thread count."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best


def mixed_batch(num_seqs: int, min_len: int, max_len: int, vocab: int, seed: int = 0) -> Batch:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(min_len, max_len + 1, (num_seqs,), generator=g)
    lengths[0] = max_len  # the batch is as wide as its longest sequence, as a rollout batch would be
    width = int(lengths.max())
    mask = (torch.arange(width)[None, :] < lengths[:, None]).long()
    ids = torch.randint(0, vocab, (num_seqs, width), generator=g) * mask
    response = mask.clone()
    response[:, : min_len // 2] = 0  # a prompt, then response/observation tokens
    return Batch({
        "input_ids": ids, "attention_mask": mask, "position_ids": torch.arange(width).expand_as(ids) * mask,
        "response_mask": response, "old_logprobs": torch.full(ids.shape, -2.0) * response,
        "advantages": torch.randn(ids.shape, generator=g) * response,
    })


def layouts(budget: int, rows: int) -> dict[str, dict]:
    return {
        "plain padding": {},
        "dynamic batching": dict(use_dynamic_batching_in_train=True, max_tokens_per_microbatch_in_train=budget,
                                 sequence_length_round_in_train=64),
        "sequence packing": dict(use_sequence_packing=True, max_tokens_per_microbatch_in_train=budget),
    }


# glibc returns big freed blocks (logits, activations) to the OS and page-faults them back in on the
# next micro-batch; keeping them measured ~6% faster steps here (sys time 0.7 s → 0 per 1000 tokens).
# The same effect as running under jemalloc/tcmalloc, which PyTorch's CPU tuning guide recommends.
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(1 << 34), "MALLOC_TRIM_THRESHOLD_": str(1 << 36), "MALLOC_TOP_PAD_": str(1 << 29)}


def strategy_runs(names: str, budget: int) -> dict[str, dict]:
    """Config overrides per strategy, all with dynamic batching: `name` or `deepspeed_train:STAGE`."""
    runs = {}
    for entry in names.split(","):
        name, _, stage = entry.strip().partition(":")
        config = {"zero_optimization": {"stage": int(stage)}} if stage else None
        runs[entry.strip()] = dict(layouts(budget, 1)["dynamic batching"],
                                   strategy_args=StrategyArgs(strategy_name=name, strategy_config=config))
    return runs


def main() -> None:
    if "--no-malloc-tuning" not in sys.argv and any(os.environ.get(k) != v for k, v in MALLOC_ENV.items()):
        # glibc reads these only at process start, so run again with them set.
        os.execve(sys.executable, sys.orig_argv, {**os.environ, **MALLOC_ENV})  # orig_argv keeps flags like -u
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-malloc-tuning", action="store_true", help="keep glibc's default malloc settings")
    parser.add_argument("--model", default=None, help="HF folder (default: the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--num-seqs", type=int, default=12)
    parser.add_argument("--min-len", type=int, default=100)
    parser.add_argument("--max-len", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=1, help="plain padding: sequences per micro-batch")
    parser.add_argument("--budget", type=int, default=1024, help="tokens per micro-batch (dynamic) / per packed row")
    parser.add_argument("--recompute-budget", type=int, default=None,
                        help="also time dynamic batching with gradient checkpointing at this many tokens per micro-batch")
    parser.add_argument("--strategies", default=None,
                        help="compare strategies instead of layouts, e.g. hf_train,fsdp2_train,deepspeed_train:3")
    args = parser.parse_args()

    if args.model:
        model_dir = Path(args.model)
    else:
        from roll.models.embedded import prepare_embedded_model

        model_dir = prepare_embedded_model()
    threads = torch.get_num_threads()
    load = os.getloadavg()[0]
    flops = matmul_flops()
    from transformers import AutoConfig

    batch = mixed_batch(args.num_seqs, args.min_len, args.max_len, vocab=min(32000, AutoConfig.from_pretrained(model_dir).vocab_size))
    useful = int(batch.tensors["attention_mask"].sum())
    base = WorkerConfig(
        model_args=ModelArgs(model_name_or_path=str(model_dir)),
        training_args=TrainingArgs(learning_rate=1e-6, per_device_train_batch_size=args.rows),
        strategy_args=StrategyArgs("hf_train"),
    )
    cfg = LossConfig(mini_batch_size=args.num_seqs, shuffle=False)
    rows, params = [], None
    runs = strategy_runs(args.strategies, args.budget) if args.strategies else layouts(args.budget, args.rows)
    if args.recompute_budget:  # activations recomputed in the backward pass: less memory, a second forward
        runs[f"dynamic batching, gradient checkpointing, {args.recompute_budget} tokens"] = dict(
            layouts(args.recompute_budget, 1)["dynamic batching"],
            model_args=dataclasses.replace(base.model_args, disable_gradient_checkpointing=False))
    for name, overrides in runs.items():
        cluster = Cluster(name, ActorWorker, dataclasses.replace(base, **overrides), executor="local", threads_per_worker=threads)
        try:
            worker = cluster.hosts[0].worker
            # counted on the first run: ZeRO-3 leaves only empty partitions in the module
            params = params or sum(p.numel() for p in worker.strategy.model.parameters())
            plan = worker.plan_micro_batches(batch, train=True)
            computed = sum(mb.num_tokens for mb, _ in plan)
            cluster.execute_rank0("train_step", batch.index(range(2)), cfg)  # warm-up: allocator, kernels
            start = time.perf_counter()
            cluster.execute_rank0("train_step", batch, cfg)
            seconds = time.perf_counter() - start
        finally:
            cluster.shutdown()
        rows.append((name, len(plan), computed, seconds, useful / seconds))
        print(f"  {name}: {seconds:.1f}s", flush=True)

    limit = flops / (6 * params)
    plain = rows[0][4]
    tuned = "default malloc" if args.no_malloc_tuning else "malloc tuned"
    print(f"\n{'SmolLM2-135M-Instruct' if not args.model else args.model} ({params / 1e6:.1f}M params), fp32, {threads} threads, {tuned}, "
          f"load avg at start {load:.2f} (other users of the cores slow every figure)")
    print(f"batch: {args.num_seqs} sequences of {args.min_len}-{args.max_len} tokens, {useful} real tokens, "
          f"padded width {batch.tensors['input_ids'].shape[1]}")
    print(f"matmul: {flops / 1e9:.1f} GFLOP/s fp32 → FLOP limit {limit:.0f} train tokens/s\n")
    print(f"| {'strategy (dynamic batching)' if args.strategies else 'layout'} | micro-batches | tokens computed | step s | useful tokens/s | vs {rows[0][0]} | % of FLOP limit |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, n_mb, computed, seconds, tps in rows:
        print(f"| {name} | {n_mb} | {computed} | {seconds:.1f} | {tps:.1f} | {tps / plain:.2f}× | {100 * tps / limit:.0f}% |")


if __name__ == "__main__":
    main()
