"""The training worker's memory, phase by phase, with the CPU example's own settings and code path.

    python benchmarks/train_worker_memory.py                       # the CPU example's actor_train
    python benchmarks/train_worker_memory.py actor_train.max_tokens_per_microbatch_in_train=1024

Builds actor_train exactly as the pipeline does (ActorWorker, hf_train, the example's micro-batching,
gradient checkpointing, AdamW; the `local` executor: the same WorkerHost, which gives freed heap
memory back after each call, in this process), then runs what one step asks of it on a batch shaped
like the example's (32 trajectories of 300–1,000 tokens with 12-token replies): the SFT warm-up's
steps (`sft_warmup.steps`, then end_sft_warmup as the pipeline calls it), and per RL step old
log-probs, the update, and the weight sync in `model_update_buffer_size_mb` buckets. After each
phase it prints the process's anonymous memory (its own heap: weights, gradients, optimizer state,
activations) and its peak resident size so far (VmHWM). Extra arguments are Hydra overrides of the
example's config.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CONFIG = (ROOT / "examples/smollm2-135M-agentic_cpu", "agent_val_frozen_lake")


def example_batch(n: int, vocab: int, seed: int = 0):
    """n right-padded trajectories of 300–1,000 tokens; the last 12 tokens of every 80 are replies."""
    from roll.data.batch import Batch

    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(300, 1001, (n,), generator=g)
    width = int(lengths.max())
    mask = (torch.arange(width)[None, :] < lengths[:, None]).long()
    response = mask * ((torch.arange(width) % 80) >= 68).long()[None, :]
    return Batch({
        "input_ids": torch.randint(5, vocab, (n, width), generator=g) * mask,
        "attention_mask": mask,
        "position_ids": torch.arange(width).expand(n, width) * mask,
        "response_mask": response,
        "advantages": torch.randn(n, width, generator=g) * response,
    })


def copy_weights(actor, buckets) -> None:
    """What a weight sync asks of actor_train: each bucket (views of its weights), then dropped before the next."""
    for names in buckets:
        part = actor.execute_rank0("get_weight_bucket", names)
        del part


def main(overrides: list[str]) -> None:
    from benchmarks.soak import MB, status_bytes
    from roll.distributed.cluster import Cluster
    from roll.models import resolve_model_path
    from roll.launch.loader import load_agentic_config
    from roll.pipeline.agentic.builders import loss_config, optimizer_steps
    from roll.pipeline.agentic.weight_sync import plan_buckets
    from roll.workers.actor_worker import ActorWorker

    config = load_agentic_config(*CONFIG, overrides=overrides)
    model_args = config.actor_train.model_args
    model_args.model_name_or_path = resolve_model_path(model_args.model_name_or_path or config.pretrain)
    threads = len(os.sched_getaffinity(0))
    actor = Cluster("actor_train", ActorWorker, config.actor_train, executor="local", threads_per_worker=threads,
                    seed=config.seed, num_training_steps=optimizer_steps(config, config.actor_train))
    worker = actor.hosts[0].worker
    vocab = worker.strategy.model.config.vocab_size
    batch = example_batch(config.rollout_batch_size, vocab)
    print(f"actor_train of {CONFIG[1]} (overrides {overrides}); {len(batch)} trajectories, "
          f"{int(batch.tensors['attention_mask'].sum())} tokens, {threads} threads; micro-batches of "
          f"{config.actor_train.max_tokens_per_microbatch_in_train} tokens, checkpointing "
          f"{not config.actor_train.model_args.disable_gradient_checkpointing}")
    print(f"{'after':<34} {'anon MB':>8} {'peak MB':>8} {'s':>6}")

    def show(name: str, seconds: float) -> None:
        anon, peak = (status_bytes(os.getpid(), field) // MB for field in ("RssAnon", "VmHWM"))
        print(f"{name:<34} {anon:>8} {peak:>8} {seconds:>6.1f}", flush=True)

    def phase(name, fn):
        start = time.time()
        out = fn()
        show(name, time.time() - start)
        return out

    show("model and optimizer built", 0.0)

    sft_inputs = batch.select(["input_ids", "attention_mask", "position_ids", "response_mask"])
    for step in range(config.sft_warmup.steps):
        phase(f"sft warm-up step {step + 1}", lambda: actor.execute_rank0(
            "sft_step", sft_inputs, learning_rate=config.sft_warmup.learning_rate, max_grad_norm=config.max_grad_norm))
    phase("sft warm-up ended", lambda: actor.execute_all("end_sft_warmup"))

    cfg = loss_config(config, config.actor_train)
    for step in (1, 2):
        old = phase(f"step {step}: old log-probs", lambda: actor.execute_rank0("compute_log_probs", batch))
        batch.tensors["old_logprobs"] = old["logprobs"]
        phase(f"step {step}: update", lambda: actor.execute_rank0("train_step", batch, cfg))
        buckets = plan_buckets(actor.execute_rank0("inference_weight_bytes"), config.model_update_buffer_size_mb << 20)
        phase(f"step {step}: weights in {len(buckets)} buckets", lambda: copy_weights(actor, buckets))
    actor.shutdown()


if __name__ == "__main__":
    main(sys.argv[1:])
