"""The actor's scoring pass and train step on one-turn agent samples, and what two savings bring there:
the output layer on response tokens only, and the prompt prefix every sample shares run once.

    .venv/bin/python benchmarks/one_turn_passes.py [--num-seqs 64 --prompt-len 118 --shared-len 72 --response-len 7 --group-size 8]
    .venv/bin/python benchmarks/one_turn_passes.py --num-seqs 32 --prompt-len 126 --shared-len 126 --response-len 28 \
        --micro-batch 8 --repeats 1 --profile      # benchmarks/vs_trl.py's Countdown step, profiled

The defaults are FrozenLake's one-board samples (agent_val_frozen_lake_memoryless.yaml): 118 prompt
tokens, of which 72 (system prompt and instructions) are the same in every sample, and a 7-token reply.
Four variants of the same work, timed alternately (`--repeats` times each, best kept), in one process:
- "before": the output layer (576 × 49,152 for SmolLM2-135M, 28M of its 135M multiply-adds per token,
  made twice in training plus a 49k-way softmax) on every token, as roll did before, and every prompt
  token computed in every row. The same code asked for every token does that work (compute_log_probs
  without `response_only`, train_step with a response mask over the whole sample), on prompts of the
  same length with nothing shared.
- "response head": the output layer on the response only, still nothing shared.
- "+ shared prefix": also the 72 shared tokens once per micro-batch (roll/strategies/shared_prefix.py),
  every prompt different after them.
- "+ group prompts": GRPO's shape, each board played by a group of `--group-size` samples (the
  one-move training episodes of agent_val_frozen_lake_quick.yaml): each group's whole prompt once.
Training runs without gradient checkpointing (the one-board config's setting; under checkpointing
transformers runs no KV cache, so nothing is shared in training there).

`--profile` then runs the last variant's train step once more under torch.profiler and prints where its
time went: backward and optimizer (the ranges torch opens around them), the rest (forward, loss, roll's
bookkeeping), what its tokens cost at the matmul rate, and the operators with the most self CPU time.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.train_throughput import MALLOC_ENV, matmul_flops  # noqa: E402
from roll.configs.worker_config import ModelArgs, StrategyArgs, TrainingArgs, WorkerConfig  # noqa: E402
from roll.data.batch import Batch  # noqa: E402
from roll.distributed import Cluster  # noqa: E402
from roll.workers.actor_worker import ActorWorker  # noqa: E402
from roll.workers.train_worker import LossConfig  # noqa: E402


def one_turn_batch(num_seqs: int, prompt_len: int, shared_len: int, response_len: int, vocab: int,
                   whole_sample: bool, group_size: int = 1) -> Batch:
    """Samples of equal length: a prompt whose first `shared_len` tokens are the same in every sample,
    and whole in each run of `group_size` samples, then a response; `whole_sample` marks every token
    but the first as response (what the output layer used to run on)."""
    g = torch.Generator().manual_seed(0)
    width = prompt_len + response_len
    ids = torch.randint(0, vocab, (num_seqs, width), generator=g)
    ids[:, :shared_len] = ids[0, :shared_len]
    for first in range(0, num_seqs, group_size):
        ids[first : first + group_size, :prompt_len] = ids[first, :prompt_len].clone()
    response = torch.zeros(num_seqs, width, dtype=torch.long)
    response[:, 1 if whole_sample else prompt_len:] = 1
    return Batch({
        "input_ids": ids, "attention_mask": torch.ones_like(ids), "position_ids": torch.arange(width).expand_as(ids),
        "response_mask": response, "advantages": torch.randn(ids.shape, generator=g) * response,
    })


def main() -> None:
    if any(os.environ.get(k) != v for k, v in MALLOC_ENV.items()):
        os.execve(sys.executable, sys.orig_argv, {**os.environ, **MALLOC_ENV})  # glibc reads these at start
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="HF folder (default: the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--num-seqs", type=int, default=64)
    parser.add_argument("--prompt-len", type=int, default=118)
    parser.add_argument("--shared-len", type=int, default=72)
    parser.add_argument("--response-len", type=int, default=7)
    parser.add_argument("--group-size", type=int, default=8, help="samples per prompt in the last variant")
    parser.add_argument("--budget", type=int, default=2048, help="tokens per micro-batch (dynamic batching)")
    parser.add_argument("--micro-batch", type=int, default=None,
                        help="samples per micro-batch in training instead of the --budget token budget")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--profile", action="store_true", help="profile the last variant's train step")
    args = parser.parse_args()

    if args.model:
        model_dir = Path(args.model)
    else:
        from roll.models.embedded import prepare_embedded_model

        model_dir = prepare_embedded_model()
    flops = matmul_flops()
    config = WorkerConfig(
        model_args=ModelArgs(model_name_or_path=str(model_dir), disable_gradient_checkpointing=True),
        training_args=TrainingArgs(learning_rate=1e-7, per_device_train_batch_size=args.micro_batch or 1,
                                   gradient_accumulation_steps=args.num_seqs // (args.micro_batch or 1)),
        strategy_args=StrategyArgs("hf_train"),
        use_dynamic_batching_in_train=args.micro_batch is None, max_tokens_per_microbatch_in_train=args.budget,
        use_dynamic_batching_in_infer=True, max_tokens_per_microbatch_in_infer=2 * args.budget,
    )
    cluster = Cluster("bench", ActorWorker, config, executor="local", threads_per_worker=torch.get_num_threads())
    worker = cluster.hosts[0].worker
    vocab = worker.strategy.model.config.vocab_size
    # variant: (a response mask over the whole sample, shared prompt tokens, samples per prompt)
    variants = {"before": (True, 0, 1), "response head": (False, 0, 1), "+ shared prefix": (False, args.shared_len, 1),
                "+ group prompts": (False, args.shared_len, args.group_size)}
    batches = {name: one_turn_batch(args.num_seqs, args.prompt_len, shared, args.response_len, vocab, whole, group)
               for name, (whole, shared, group) in variants.items()}
    cfg = LossConfig(mini_batch_size=args.num_seqs, shuffle=False)
    passes = {
        "scoring (old log-probs)": lambda name: cluster.execute_rank0("compute_log_probs", batches[name],
                                                                       response_only=not variants[name][0]),
        "train step": lambda name: cluster.execute_rank0("train_step", batches[name], cfg),
    }
    best: dict[tuple[str, str], float] = {}
    try:
        cluster.execute_rank0("train_step", batches["before"].index(range(2)), cfg)  # warm-up: allocator, kernels
        for _ in range(args.repeats):
            for pass_name, run in passes.items():
                for name in variants:
                    start = time.perf_counter()
                    run(name)
                    seconds = time.perf_counter() - start
                    best[pass_name, name] = min(best.get((pass_name, name), float("inf")), seconds)
                    print(f"  {pass_name}, {name}: {seconds:.1f} s", flush=True)
        if args.profile:
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                start = time.perf_counter()
                passes["train step"](list(variants)[-1])
                profiled = time.perf_counter() - start
    finally:
        cluster.shutdown()

    tokens = args.num_seqs * (args.prompt_len + args.response_len)
    print(f"\n{model_dir.name}, fp32, {torch.get_num_threads()} threads; {args.num_seqs} samples of {args.prompt_len} prompt "
          f"({args.shared_len} shared by all, all by groups of {args.group_size}) + {args.response_len} response tokens ({tokens} tokens), micro-batches of "
          f"{args.budget} tokens in training; matmul {flops / 1e9:.0f} GFLOP/s; best of {args.repeats}\n")
    print("| pass | " + " | ".join(f"{name}, s" for name in variants) + " | speed-up |")
    print("|---|" + "---:|" * (len(variants) + 1))
    for pass_name in passes:
        times = [best[pass_name, name] for name in variants]
        print(f"| {pass_name} | " + " | ".join(f"{t:.1f}" for t in times) + f" | {times[0] / times[-1]:.2f}× |")
    if args.profile:
        params = sum(p.numel() for p in worker.strategy.model.parameters())
        run_tokens = args.num_seqs // args.group_size * args.prompt_len + args.num_seqs * args.response_len
        print_profile(prof, profiled, best["train step", list(variants)[-1]], 6 * params * run_tokens / flops, run_tokens)


def print_profile(prof, profiled: float, step: float, token_limit: float, run_tokens: int, top: int = 25) -> None:
    """The profiled train step: its phases and its costliest operators, beside the token-work limit."""
    events = prof.key_averages()
    # torch opens these ranges around each backward node and each optimizer step
    phases = {"backward": "autograd::engine::evaluate_function", "optimizer": "Optimizer.step"}
    spent = {phase: sum(e.cpu_time_total for e in events if e.key.startswith(key)) / 1e6 for phase, key in phases.items()}
    spent["forward, loss and the rest"] = profiled - sum(spent.values())
    print(f"\ntrain step of the last variant: {step:.1f} s ({profiled:.1f} s under the profiler); the {run_tokens} tokens "
          f"it runs (each group's prompt once) cost {token_limit:.1f} s at the matmul rate ({token_limit / step:.0%} of the step)")
    for phase, seconds in spent.items():
        print(f"  {phase:<28} {seconds:6.1f} s")
    print(events.table(sort_by="self_cpu_time_total", row_limit=top, max_name_column_width=60))


if __name__ == "__main__":
    main()
