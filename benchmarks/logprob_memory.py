"""Peak memory of token log-probs and entropy: the naive formulas vs roll.algorithms.

    .venv/bin/python benchmarks/logprob_memory.py            # 8×1024 tokens, 50,257-token vocab, fp32, CPU
    .venv/bin/python benchmarks/logprob_memory.py --vocab 49152 --hidden 576   # SmolLM2-135M's head

Each case runs in its own process so one case's freed memory cannot hide the next one's peak.
Rows "logprobs" and "entropy" start from logits that already exist: the figure is the growth of the
process's peak resident memory (ru_maxrss) over the moment the logits exist; in "fwd+bwd" it
includes the logits' own gradient (N×V), which every method given logits must produce.
Row "head" starts one step earlier, from the final hidden states [B, T, hidden] and the output layer,
as the trainer does: "naive" is lm_head then logprobs.py (log-probs and entropy), what the trainer did
before; "roll" is head_logprobs.py, where the output layer runs chunk by chunk and no [B, T, V]
logits or gradient exist. The figure counts everything made after the hidden states.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from roll.algorithms import entropy_for_input_ids, entropy_from_logits, logprobs_for_input_ids, logprobs_from_logits  # noqa: E402
from roll.algorithms.head_logprobs import head_logprobs_for_input_ids  # noqa: E402


def naive_logprobs(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)


def naive_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    probs = torch.softmax(logits.float(), dim=-1)
    return torch.logsumexp(logits.float(), dim=-1) - (probs * logits.float()).sum(-1)


def naive_head(hidden: torch.Tensor, head: torch.nn.Linear, ids: torch.Tensor) -> torch.Tensor:
    logits = head(hidden)
    return logprobs_for_input_ids(logits, ids) + entropy_for_input_ids(logits)


def roll_head(hidden: torch.Tensor, head: torch.nn.Linear, ids: torch.Tensor) -> torch.Tensor:
    logprobs, entropy = head_logprobs_for_input_ids(hidden, head, ids, with_entropy=True)
    return logprobs + entropy


HEAD_CASES = {"naive": naive_head, "roll": roll_head}

CASES = {
    ("logprobs", "naive"): naive_logprobs,
    ("logprobs", "roll"): logprobs_from_logits,
    ("entropy", "naive"): naive_entropy,
    ("entropy", "roll"): lambda logits, labels: entropy_from_logits(logits),
}


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def run_head_case(method: str, mode: str, batch: int, seq: int, vocab: int, hidden_size: int) -> dict:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    train = mode == "fwd+bwd"
    head = torch.nn.Linear(hidden_size, vocab, bias=False)
    hidden = torch.randn(batch, seq, hidden_size, requires_grad=train)
    ids = torch.randint(0, vocab, (batch, seq))
    fn = HEAD_CASES[method]
    with torch.set_grad_enabled(train):  # warm-up on a tiny input
        warm = fn(torch.randn(2, 3, hidden_size, requires_grad=train), head, torch.randint(0, vocab, (2, 3)))
        if train:
            warm.sum().backward()
            head.weight.grad = None
    before = _peak_mib()
    start = time.perf_counter()
    with torch.set_grad_enabled(train):
        out = fn(hidden, head, ids)
        if train:
            out.sum().backward()
    return {"extra_mib": _peak_mib() - before, "seconds": time.perf_counter() - start}


def run_case(quantity: str, method: str, mode: str, batch: int, seq: int, vocab: int, dtype: str) -> dict:
    torch.set_num_threads(1)  # a shared machine; the figure of interest is memory, not speed
    torch.manual_seed(0)
    logits = torch.randn(batch, seq, vocab, dtype=getattr(torch, dtype))
    labels = torch.randint(0, vocab, (batch, seq))
    train = mode == "fwd+bwd"
    fn = CASES[(quantity, method)]
    # Warm up on a tiny input first so one-off library allocations are not billed to the method.
    tiny = torch.randn(2, 3, 17, dtype=logits.dtype, requires_grad=train)
    with torch.set_grad_enabled(train):
        warm = fn(tiny, torch.randint(0, 17, (2, 3)))
        if train:
            warm.sum().backward()
    logits.requires_grad_(train)
    before = _peak_mib()
    start = time.perf_counter()
    with torch.set_grad_enabled(train):
        out = fn(logits, labels)
        if train:
            out.sum().backward()
    seconds = time.perf_counter() - start
    return {"extra_mib": _peak_mib() - before, "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--vocab", type=int, default=50257)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--hidden", type=int, default=576, help="hidden size of the 'head' row (float32)")
    parser.add_argument("--rows", nargs="+", default=["logprobs", "entropy", "head"],
                        choices=["logprobs", "entropy", "head"])
    parser.add_argument("--case", nargs=3, metavar=("QUANTITY", "METHOD", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        quantity, method, mode = args.case
        if quantity == "head":
            print(json.dumps(run_head_case(method, mode, args.batch, args.seq, args.vocab, args.hidden)))
        else:
            print(json.dumps(run_case(quantity, method, mode, args.batch, args.seq, args.vocab, args.dtype)))
        return

    element = torch.tensor([], dtype=getattr(torch, args.dtype)).element_size()
    logits_mib = args.batch * args.seq * args.vocab * element / 2**20
    print(f"logits {args.batch}×{args.seq}×{args.vocab} {args.dtype}: {logits_mib:,.0f} MiB (not counted in the "
          f"logprobs / entropy rows; the head rows, float32, start from hidden states of width {args.hidden})\n")
    print(f"| quantity | mode    | naive MiB | roll MiB | roll / naive | naive s | roll s |")
    print(f"|----------|---------|----------:|---------:|-------------:|--------:|-------:|")
    for quantity in args.rows:
        for mode in ("no-grad", "fwd+bwd"):
            result = {}
            for method in ("naive", "roll"):
                cmd = [sys.executable, __file__, "--case", quantity, method, mode, "--batch", str(args.batch),
                       "--seq", str(args.seq), "--vocab", str(args.vocab), "--dtype", args.dtype,
                       "--hidden", str(args.hidden)]
                result[method] = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
            naive, ours = result["naive"], result["roll"]
            print(f"| {quantity:8} | {mode:7} | {naive['extra_mib']:9,.0f} | {ours['extra_mib']:8,.0f} | "
                  f"{ours['extra_mib'] / max(naive['extra_mib'], 1):12.2f} | {naive['seconds']:7.2f} | {ours['seconds']:6.2f} |")


if __name__ == "__main__":
    main()
