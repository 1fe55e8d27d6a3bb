"""Peak resident memory of one training step of the embedded model, with and without gradient
checkpointing: what a micro-batch's activations cost the training worker, without Ray or the pipeline.

    python benchmarks/train_step_memory.py 8 256 0    # 8 sequences × 256 tokens, checkpointing off
    python benchmarks/train_step_memory.py 8 256 1    # the same with gradient checkpointing

Runs two steps (forward, a log-prob loss over the output layer in 256-token chunks, backward, AdamW)
on random token ids in fp32 with one thread, then prints the process's peak resident size
(ru_maxrss) and the seconds per step. Weights, gradients and AdamW's moments alone are about 2.2 GB.
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

MODEL = Path.home() / ".cache/roll/models/SmolLM2-135M-Instruct"  # written by scripts/bootstrap.sh


def main(n_seq: int, seq_len: int, checkpointing: bool) -> None:
    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(MODEL, dtype=torch.float32)
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    ids = torch.randint(0, model.config.vocab_size, (n_seq, seq_len))
    start = time.time()
    for _ in range(2):
        hidden = model.model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state
        loss = sum(torch.log_softmax(model.lm_head(chunk), -1)[..., 0].mean() for chunk in hidden.split(256, dim=1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{n_seq} × {seq_len} tokens, checkpointing {checkpointing}: peak resident {peak_mb:.0f} MB, "
          f"{(time.time() - start) / 2:.1f} s/step")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1")
