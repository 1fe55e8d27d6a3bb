"""One prepared check of roll's CUDA paths, for a lent GPU machine (one H100 or H200, no Ray, no vLLM,
no network), and of the same code on CPU so that it cannot rot.

    scripts/gpu_check.sh                    # on the GPU machine: Qwen2.5-0.5B-shaped model, bf16
    scripts/gpu_check.sh --device cpu       # here and in CI: the tiny random model

On a model built from a config with random weights (Qwen2.5-0.5B's shapes on CUDA, the tiny test model
on CPU), without Ray, each check in one process:
- hf_train and fsdp2_train (one rank: NCCL on CUDA, gloo on CPU): bf16 PPO steps on one fixed batch with
  dynamic batching, then with sequence packing; the response NLL falls; bf16 log-probs against fp32's;
  packed against dynamic log-probs; tokens/s and MFU against the card's bf16 peak (on CPU: the fp32
  matmul rate measured here); the training peak (torch.cuda.max_memory_allocated) against the estimate;
- fsdp2_train checkpoint: save, load, and the next step bit-identical to a run that never stopped;
- fsdp2_train with `offload_policy` (pinned CPU memory on CUDA): steps that lower the response NLL;
- hf_infer's decode engine on the device: multi-turn sessions whose recorded log-probs a fresh forward
  pass reproduces, seeded sampling, generated tokens/s against transformers' generate on the same
  requests, the engine's peak against the estimate;
- the launcher's memory check, its GPU branch on CUDA.
A failing check becomes a FAIL row and the others still run; the exit status is 1 when any failed.
Prints one table (and writes it to --out when given).
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import platform
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch
import transformers
from transformers import AutoModelForCausalLM, Qwen2Config

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpu_check_parts import (  # noqa: E402  (beside this file)
    Row,
    Setup,
    check_checkpoint,
    check_decode_engine,
    check_memory_branch,
    check_offload,
    check_training,
    fp32_reference,
    make_batch,
)
from roll.launch.memory_estimate import model_facts  # noqa: E402
from roll.models.tiny import build_tokenizer  # noqa: E402

# Qwen2.5-0.5B's config.json shapes (tied embeddings, 151,936-token vocabulary)
QWEN25_05B = dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                  num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
                  rms_norm_eps=1e-6, tie_word_embeddings=True)
# dense bf16 matrix rate of the card by its datasheet (SXM parts; the H200 has the H100's arithmetic)
BF16_PEAK = {"H100": 989e12, "H200": 989e12}
# Not on the lent GPU machine (Ray and vLLM are too large to carry, Hydra and OmegaConf are not
# installed there): nothing the check runs may import them.
FORBIDDEN_MODULES = ("ray", "vllm", "hydra", "omegaconf")
MARK = {True: "PASS", False: "FAIL", None: ""}
# On CUDA the whole check must end within 8 minutes; past that (a hung NCCL call, say) every thread's
# traceback is printed and the process exits, well inside a lease's command limit.
CUDA_DEADLINE_S = 480


# the tiny test model's shapes, tied like Qwen2.5-0.5B's, so the CPU run takes the same code paths
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=4096, tie_word_embeddings=True)


def build_model(folder: Path, device: str) -> Path:
    """A random-weight model folder with the tiny tokenizer: Qwen2.5-0.5B-shaped on CUDA, tiny on CPU."""
    tokenizer = build_tokenizer("qwen2")
    shape = QWEN25_05B if device == "cuda" else {**TINY, "vocab_size": len(tokenizer)}
    config = Qwen2Config(**shape, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    with torch.device(device):  # random init on the GPU: seconds instead of a minute on the CPU
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def matmul_rate(device: str) -> float:
    """FLOP/s of a large matrix product here (bf16 8192³ on CUDA, fp32 512³ on CPU), best of 10."""
    n, dtype = (8192, torch.bfloat16) if device == "cuda" else (512, torch.float32)
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    best = float("inf")
    for i in range(13):
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        a @ b
        if device == "cuda":
            torch.cuda.synchronize()
        if i >= 3:
            best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best


def make_setup(device: str) -> tuple[Setup, list[Row]]:
    rate = matmul_rate(device)
    if device == "cuda":
        name = torch.cuda.get_device_name(0)
        peak = next((v for k, v in BF16_PEAK.items() if k in name), rate)
        peak_name = f"{peak / 1e12:.0f} TFLOP/s ({'datasheet bf16' if peak != rate else 'measured matmul'})"
        info = Row("device", f"{name}, torch {torch.__version__}, CUDA {torch.version.cuda}, transformers "
                   f"{transformers.__version__}, Python {platform.python_version()}",
                   f"bf16 8192³ matmul {rate / 1e12:.0f} TFLOP/s")
        g = torch.Generator().manual_seed(0)
        lengths = sorted(torch.randint(256, 2049, (16,), generator=g).tolist())
        return Setup(device, lengths, prompt=64, budget=4096, learning_rate=3e-4, train_steps=3, requests=32,
                     request_prompt=128, new_tokens=128, sessions=4, turns=3, peak_flops=peak, peak_name=peak_name), [info]
    info = Row("device", f"CPU, torch {torch.__version__}, transformers {transformers.__version__}, Python "
               f"{platform.python_version()}", f"fp32 512³ matmul {rate / 1e9:.1f} GFLOP/s")
    return Setup(device, [12, 17, 21, 26, 30, 33, 37, 40], prompt=4, budget=96, learning_rate=1e-2, train_steps=2,
                 requests=4, request_prompt=16, new_tokens=8, sessions=2, turns=2, peak_flops=rate,
                 peak_name=f"{rate / 1e9:.1f} GFLOP/s (fp32 matmul measured)"), [info]


def guarded(name: str, check, *args) -> list[Row]:
    """The check's rows, or one FAIL row naming the exception (its traceback goes to stderr). Each row
    is also printed to stderr as soon as it exists, so a run cut short still shows what it measured."""
    try:
        rows = check(*args)
    except Exception as exc:  # noqa: BLE001 - one broken path must not hide the others' results
        traceback.print_exc()
        rows = [Row(name, f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}", "runs", False)]
    for row in rows:
        print(f"[gpu_check] {row.check}: {row.result} ({row.bound}) {MARK[row.ok]}", file=sys.stderr, flush=True)
    return rows


def table(rows: list[Row], seconds: float) -> str:
    lines = ["| check | result | bound / conditions | |", "|---|---|---|---|"]
    lines += [f"| {r.check} | {r.result} | {r.bound} | {MARK[r.ok]} |" for r in rows]
    failed = sum(r.ok is False for r in rows)
    lines.append(f"\n{sum(r.ok is True for r in rows)} passed, {failed} failed in {seconds:.0f} s")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--out", type=Path, help="folder to write gpu_check.md and gpu_check.json into")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("no CUDA device here: run with --device cpu (the tiny model)")
    if args.device == "cpu" and torch.cuda.is_available():
        parser.error("--device cpu with a GPU visible: run it through scripts/gpu_check.sh, which hides the GPU")
    if args.device == "cuda":
        faulthandler.dump_traceback_later(CUDA_DEADLINE_S, exit=True)
    start = time.perf_counter()
    setup, rows = make_setup(args.device)
    with tempfile.TemporaryDirectory() as folder:
        model_dir = build_model(Path(folder) / "model", args.device)
        vocab = model_facts(str(model_dir)).vocab
        try:  # the fp32 log-probs the bf16 rows are compared with; without them those rows fail
            reference = fp32_reference(model_dir, setup, make_batch(setup, vocab))
        except Exception:  # noqa: BLE001 - the other checks still run
            traceback.print_exc()
            reference = None
        for strategy in ("hf_train", "fsdp2_train"):
            rows += guarded(f"{strategy}: training", check_training, model_dir, strategy, setup, reference)
        rows += guarded("fsdp2_train: checkpoint", check_checkpoint, model_dir, setup)
        rows += guarded("fsdp2_train: offload", check_offload, model_dir, setup)
        rows += guarded("hf_infer: decode engine", check_decode_engine, model_dir, setup, vocab)
        rows += guarded("memory check", check_memory_branch, model_dir, setup)
    loaded = [m for m in FORBIDDEN_MODULES if m in sys.modules]
    rows.append(Row("no Ray, vLLM, Hydra or OmegaConf imported", f"imported: {loaded or 'none'}", "none", not loaded))
    seconds = time.perf_counter() - start
    text = table(rows, seconds)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "gpu_check.md").write_text(text + "\n")
        (args.out / "gpu_check.json").write_text(json.dumps([r.__dict__ for r in rows], indent=1))
    return 1 if any(r.ok is False for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
