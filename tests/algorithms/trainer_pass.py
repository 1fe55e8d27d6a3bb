"""One forward+backward of the actor's loss, run by test_head_logprobs.py in a fresh process so its peak
resident memory is this pass's alone.

    python tests/algorithms/trainer_pass.py MODEL_DIR chunked|full GRADS_FILE [hf_train|fsdp2_train]

Prints one JSON line: the loss parts, where the gradients were saved, and the growth of the peak
resident memory (MiB) from just before the first forward to the end of the last backward.
"""

from __future__ import annotations

import json
import resource
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from roll.workers.actor_worker import ActorWorker  # noqa: E402
from roll.workers.train_worker import LossConfig  # noqa: E402
from tests.workers.helpers import actor_config, make_batch  # noqa: E402


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(model_dir: str, mode: str, grads_file: str, strategy: str = "hf_train") -> None:
    torch.set_num_threads(1)
    worker_config = actor_config(Path(model_dir), strategy)
    worker_config.training_args.per_device_train_batch_size = 4  # 2 micro-batches of 4 × 512 tokens
    worker = ActorWorker(worker_config)
    if mode == "full":
        worker.strategy.forward_token_logprobs = lambda *args: None  # the strategy's full-logits forward
    config = worker.strategy.model.config
    batch = make_batch([512, 500, 480, 512, 512, 300, 512, 450], seed=1, vocab=config.vocab_size)
    cfg = LossConfig(use_kl_loss=True, kl_loss_coef=0.1, entropy_loss_coef=0.01, norm_length=512)
    mask = batch.tensors["response_mask"]
    worker.strategy.model.train()
    plan = worker.plan_micro_batches(batch, train=True)
    # a warm-up pass on 2 short samples first: one-off costs (fsdp2_train's lazy set-up and the code it
    # loads on its first forward) are not the pass's memory
    warm = make_batch([8, 8], vocab=config.vocab_size)
    for mb, _ in worker.plan_micro_batches(warm, train=True):
        worker.strategy.backward(worker.micro_batch_loss(mb, warm, cfg, 12.0, 2.0)[0])
    worker.strategy.model.zero_grad(set_to_none=True)
    losses: dict[str, float] = {}
    before = peak_mib()
    for mb, _ in plan:
        loss, shares, rates = worker.micro_batch_loss(mb, batch, cfg, float((mask != 0).sum()), float(len(batch)))
        worker.strategy.backward(loss)
        for key, value in {**shares, "actor/entropy": rates["actor/entropy"]}.items():
            losses[key] = losses.get(key, 0.0) + value
    peak = peak_mib() - before
    # fsdp2_train's gradients are DTensors (one shard here): full_tensor() makes them plain
    grads = {name: (p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad).clone()
             for name, p in worker.strategy.model.named_parameters() if p.grad is not None}
    torch.save(grads, grads_file)
    with torch.no_grad():
        chunked = worker.strategy.forward_token_logprobs(plan[0][0], False) is not None
    worker.shutdown()
    print(json.dumps({"chunked": chunked, "losses": losses, "grads": grads_file, "peak_mib": peak,
                      "micro_batches": len(plan)}))


if __name__ == "__main__":
    main(*sys.argv[1:5])
