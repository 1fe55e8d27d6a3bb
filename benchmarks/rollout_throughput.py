"""Rollout throughput: SmolLM2-135M-Instruct (fp32) playing FrozenLake with many envs.

Compares, on the same machine in the same run:
  (a) naive    one env at a time; each turn the whole history is re-encoded and `model.generate` runs
  (b) batched  each turn all live envs' full histories are re-encoded, left-padded, one `model.generate`
  (c) roll     roll's rollout stack (RolloutScheduler, local executor -> TrajEnvManager threads ->
               DecodeEngine: continuous batching, per-episode KV cache kept between turns, shared prefixes)
  (d) vllm     the same rollout stack with the `vllm` inference strategy (vLLM's engine: continuous
               batching, automatic prefix caching); needs .venv-vllm (scripts/setup_vllm.sh)
and reports env steps/s, generated tokens/s and each engine's generated tokens/s as a fraction of a
forward-pass limit (tokens/s of one big batched forward over the same model, no cache, measured in
the same run), plus roll's decode / prefill tokens/s as fractions of that limit.

    .venv/bin/python benchmarks/rollout_throughput.py --envs 32 --turns 3 --max-new-tokens 24
    .venv-vllm/bin/python benchmarks/rollout_throughput.py --skip naive,batched   # (c) and (d) side by side
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from roll.agentic.env import make_env
from roll.configs.worker_config import GeneratingArgs
from roll.configs.agentic_config import DEFAULT_AGENT_TEMPLATE, CustomEnvConfig, EnvManagerConfig

DEFAULT_SYSTEM_TEMPLATE = CustomEnvConfig().agent_system_template


def manager_config(envs: int, max_new_tokens: int) -> EnvManagerConfig:
    """One env per group, greedy (the benchmark needs no config files)."""
    return EnvManagerConfig(num_env_groups=envs, group_size=1, tags=["FrozenLake"],
                            generating_args=GeneratingArgs(max_new_tokens=max_new_tokens, do_sample=False, temperature=0.0))


def user_turn(obs: str, turn: int, turns: int, max_new: int, instruction: str = "") -> str:
    text = DEFAULT_AGENT_TEMPLATE.format(turn_idx=turn + 1, observation=obs, actions_left=turns - turn, max_response_length=max_new)
    return (instruction + "\n" + text) if instruction else text


def new_episode(seed: int, turns: int, max_new: int):
    env = make_env("frozen_lake", is_slippery=False, max_steps=turns)
    obs, info = env.reset(seed)
    messages = [{"role": "system", "content": DEFAULT_SYSTEM_TEMPLATE},
                {"role": "user", "content": user_turn(obs, 0, turns, max_new, info["env_instruction"])}]
    return env, messages


def play(env, messages, text: str, turn: int, turns: int, max_new: int) -> bool:
    """Steps the env with `text`; returns whether the episode goes on (and appends the next turn)."""
    obs, _, terminated, truncated, _ = env.step(text)
    messages.append({"role": "assistant", "content": text})
    if terminated or truncated or turn + 1 >= turns:
        return False
    messages.append({"role": "user", "content": user_turn(obs, turn + 1, turns, max_new)})
    return True


def strip_eos(ids: list[int], tok) -> tuple[list[int], int]:
    """The response before eos (what the env gets), and how many tokens were generated (eos counts)."""
    if tok.eos_token_id in ids:
        cut = ids.index(tok.eos_token_id)
        return ids[:cut], cut + 1
    return ids, len(ids)


def run_naive(model, tok, envs: int, turns: int, max_new: int) -> dict:
    steps = tokens = 0
    start = time.perf_counter()
    for i in range(envs):
        env, messages = new_episode(1000 + i, turns, max_new)
        for turn in range(turns):
            ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)["input_ids"]
            out = model.generate(ids, max_new_tokens=max_new, do_sample=False, pad_token_id=tok.pad_token_id)[0, ids.shape[1]:].tolist()
            gen, count = strip_eos(out, tok)
            tokens += count
            steps += 1
            if not play(env, messages, tok.decode(gen), turn, turns, max_new):
                break
    return {"steps": steps, "tokens": tokens, "seconds": time.perf_counter() - start}


def run_batched(model, tok, envs: int, turns: int, max_new: int) -> dict:
    tok.padding_side = "left"
    episodes = [new_episode(1000 + i, turns, max_new) for i in range(envs)]
    live = list(range(envs))
    steps = tokens = 0
    start = time.perf_counter()
    for turn in range(turns):
        if not live:
            break
        texts = [tok.apply_chat_template(episodes[i][1], add_generation_prompt=True, tokenize=False) for i in live]
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        out = model.generate(**enc, max_new_tokens=max_new, do_sample=False, pad_token_id=tok.pad_token_id)
        still = []
        for row, i in enumerate(live):
            full = out[row, enc["input_ids"].shape[1]:].tolist()
            gen, count = strip_eos(full, tok)
            tokens += count
            steps += 1
            if play(*episodes[i], tok.decode(gen), turn, turns, max_new):
                still.append(i)
        live = still
    return {"steps": steps, "tokens": tokens, "seconds": time.perf_counter() - start}


def rollout(strategy, model_dir: str, envs: int, turns: int, max_new: int) -> dict:
    """The envs' episodes through roll's RolloutScheduler (local executor) served by `strategy`."""
    from roll.pipeline.agentic.rollout_scheduler import RolloutScheduler

    spec = CustomEnvConfig(env_type="frozen_lake", max_steps=turns, max_tokens_per_step=max_new,
                           env_config={"is_slippery": False, "max_steps": turns})
    scheduler = RolloutScheduler(manager_config(envs, max_new), {"FrozenLake": spec}, sequence_length=4096, seed=1000,
                                 tokenizer_path=model_dir, proxy={"type": "policy", "workers": [strategy]}, executor="local")
    try:
        start = time.perf_counter()
        batch = scheduler.get_batch(envs, step=0)
        seconds = time.perf_counter() - start
    finally:
        scheduler.shutdown()
        strategy.shutdown()
    return {"steps": int(sum(m["num_actions"] for m in batch["env_metrics"])), "tokens": int(batch["response_mask"].sum()),
            "seconds": seconds}


def run_roll(model_dir: str, envs: int, turns: int, max_new: int) -> dict:
    from roll.strategies.hf_infer import HFInferStrategy

    strategy = HFInferStrategy(model_dir, max_batch_size=envs, max_sessions=envs * 2)
    row = rollout(strategy, model_dir, envs, turns, max_new)
    stats = strategy.engine.stats
    return {**row, "prefill_tps": stats["prefill_tokens"] / max(stats["prefill_s"], 1e-9),
            "decode_tps": stats["decode_tokens"] / max(stats["decode_s"], 1e-9), "cached": stats["cached_tokens"],
            "prefilled": stats["prefill_tokens"]}


def run_vllm(model_dir: str, envs: int, turns: int, max_new: int, threads: int, block_size: int | None) -> dict:
    """(d): the same rollout with the vllm strategy; its engine start (about 10-20 s) is not timed."""
    from roll.strategies.vllm_infer import VLLMInferStrategy

    config = {"block_size": block_size} if block_size else None
    strategy = VLLMInferStrategy(model_dir, max_batch_size=envs, num_threads=threads, strategy_config=config)
    from roll.strategies.generation import GenerationRequest, SamplingParams

    warm = SamplingParams(max_new_tokens=4, do_sample=False, temperature=0.0, top_p=1.0, top_k=0)
    strategy.generate([GenerationRequest(input_ids=[1, 2, 3], sampling=warm)])  # warm-up, as for (a)-(c)
    row = rollout(strategy, model_dir, envs, turns, max_new)
    stats = strategy.stats
    return {**row, "cached": stats["cached_tokens"], "prefilled": stats["prefill_tokens"]}


@torch.inference_mode()
def forward_limit(model, batch: int = 4, length: int = 256) -> float:
    """Tokens/s of one batched forward without cache: the matmul-bound ceiling (best of 3)."""
    ids = torch.randint(0, model.config.vocab_size, (batch, length))
    model(ids)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        model(ids)
        best = min(best, time.perf_counter() - start)
    return batch * length / best


def warm_up(model, tok) -> None:
    """First calls pay one-off costs (allocator, kernels); keep them out of every mode's timing."""
    ids = tok("warm up", return_tensors="pt")["input_ids"]
    model.generate(ids, max_new_tokens=4, do_sample=False, pad_token_id=tok.pad_token_id)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, default=32)
    parser.add_argument("--naive-envs", type=int, default=4, help="envs the naive loop plays (its rate is per step)")
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads for every mode (on a loaded 2-core machine 1 beats 2 by far: see docs/rollout.md)")
    parser.add_argument("--vllm-block-sizes", default="0",
                        help="comma-separated KV block sizes, one vllm row each (0: vLLM's default, 128 on CPU)")
    parser.add_argument("--model", default=None, help="a Hugging Face folder (default: the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--skip", default="", help="comma-separated modes to skip: naive,batched,vllm "
                        "(vllm is skipped anyway where vLLM is not installed)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    if args.model is None:
        from roll.models.embedded import prepare_embedded_model

        args.model = str(prepare_embedded_model())
    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    load_before = os.getloadavg()[0]
    warm_up(model, tok)
    limit = forward_limit(model)
    rows = {}
    skip = set(args.skip.split(","))

    def measure(name: str, run) -> dict:
        """One row, with the forward-pass limit measured right before and after it: on a shared
        machine the load drifts, so each row is compared with the limit of its own minutes."""
        before = forward_limit(model)
        row = run()
        rows[name] = {**row, "limit": (before + forward_limit(model)) / 2}
        return rows[name]

    if "naive" not in skip:
        measure("(a) naive: one env, generate per turn", lambda: run_naive(model, tok, args.naive_envs, args.turns, args.max_new_tokens))
    if "batched" not in skip:
        measure("(b) batched: all envs, re-encode + generate", lambda: run_batched(model, tok, args.envs, args.turns, args.max_new_tokens))
    ours = measure("(c) roll: decode engine", lambda: run_roll(args.model, args.envs, args.turns, args.max_new_tokens))
    from roll.strategies.vllm_infer import vllm_unavailable_reason

    if "vllm" not in skip and vllm_unavailable_reason() is None:
        for block in [int(b) for b in args.vllm_block_sizes.split(",")]:
            label = f"block {block}" if block else "default blocks"
            measure(f"(d) vllm strategy, {label}", lambda b=block: run_vllm(args.model, args.envs, args.turns,
                                                                             args.max_new_tokens, args.threads, b))
    elif "vllm" not in skip:
        print(f"(d) vllm skipped: {vllm_unavailable_reason()}")
    limit_after = forward_limit(model)
    print(f"\nSmolLM2-135M-Instruct fp32, FrozenLake, {args.envs} envs, {args.turns} turns, max_new_tokens "
          f"{args.max_new_tokens}, greedy, {args.threads} torch threads; load avg {load_before:.1f} -> {os.getloadavg()[0]:.1f}")
    print(f"forward-pass limit (batched forward, 4x256 tokens): {limit:.0f} tokens/s before, {limit_after:.0f} after\n")
    print("| mode | env steps | gen tokens | seconds | env steps/s | gen tokens/s | forward limit then (tokens/s) "
          "| gen tokens/s ÷ that limit | roll speed-up (steps/s) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    ours_rate = ours["steps"] / ours["seconds"]
    for name, r in rows.items():
        rate, tps = r["steps"] / r["seconds"], r["tokens"] / r["seconds"]
        print(f"| {name} | {r['steps']} | {r['tokens']} | {r['seconds']:.1f} | {rate:.2f} | {tps:.1f} | {r['limit']:.0f} | "
              f"{tps / r['limit']:.3f} | {ours_rate / rate:.2f}x |")
    print(f"\nroll decode: {ours['decode_tps']:.0f} tokens/s = {ours['decode_tps'] / ours['limit']:.2f} of the forward limit; "
          f"prefill: {ours['prefill_tps']:.0f} tokens/s = {ours['prefill_tps'] / ours['limit']:.2f} of the limit; "
          f"prompt tokens prefilled {ours['prefilled']}, served from cache {ours['cached']}")
    for name, v in rows.items():
        if name.startswith("(d)"):
            print(f"{name}: prompt tokens prefilled {v['prefilled']}, served from its prefix cache {v['cached']} "
                  f"({v['cached'] / max(v['cached'] + v['prefilled'], 1):.0%})")


if __name__ == "__main__":
    main()
