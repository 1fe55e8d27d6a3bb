"""roll beside TRL: the same GRPO work on Countdown, run by roll and by TRL's GRPOTrainer in one run.

Runs roll on examples/smollm2-135M-agentic_cpu/agent_countdown.yaml through its real launcher, then TRL's
GRPOTrainer (benchmarks/vs_trl_worker.py, in its own virtual environment .venv-trl, created on first use
with TRL pinned; see trl_venv.py) on the very prompts roll's env produced at each step, with the same
model folder, answers per prompt, answer length, learning rate, sampling, precision, micro-batches and
one optimizer step per RL step; TRL's answers are scored by roll's CountdownEnv (a reward server in this
process). It prints the settings both used side by side, then per framework the seconds per step (the
median of steps 2..N), where they went, generated and trained tokens/s and their share of the FLOP limit
the machine's own fp32 matmul rate allows (measured before and after in the same run): 2 × parameters per
generated token, 6 × parameters per trained token. The reference is TRL, measured in the same run.

    python benchmarks/vs_trl.py                       # SmolLM2-135M-Instruct, 6 steps of 4 prompts × 8 answers
    python benchmarks/vs_trl.py --tiny --steps 2 --prompts 2 --group 4 --max-new-tokens 8   # smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Listener
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.train_throughput import matmul_flops  # noqa: E402
from benchmarks.trl_venv import ensure_trl_venv  # noqa: E402
from roll.agentic.env import make_env  # noqa: E402
from roll.configs.agentic_config import AgenticConfig  # noqa: E402
from roll.distributed.cluster import cpu_count  # noqa: E402
from roll.launch.loader import load_agentic_config  # noqa: E402
from roll.models import EMBEDDED_MODEL_NAME, resolve_model_path  # noqa: E402
from roll.viewer.records import load_trajectories  # noqa: E402

CONFIG_DIR, CONFIG_NAME, TAG = ROOT / "examples" / "smollm2-135M-agentic_cpu", "agent_countdown", "Countdown"
TINY_MODEL = "tiny-random-qwen2"
MICRO_BATCH = 8  # samples per forward/backward in both; the rest of the step's samples accumulate


@dataclass(frozen=True)
class SideBySide:
    """What both frameworks are given."""

    model: str  # a local Hugging Face folder
    steps: int = 6
    prompts: int = 4
    group: int = 8
    max_new_tokens: int = 32
    learning_rate: float = 1e-6
    seed: int = 42
    threads: int = 1

    @property
    def samples(self) -> int:
        return self.prompts * self.group

    @property
    def micro_batch(self) -> int:
        size = min(MICRO_BATCH, self.samples)
        if self.samples % size:
            raise ValueError(f"prompts × group = {self.samples} must be a multiple of {size}, the micro-batch size")
        return size


def roll_overrides(s: SideBySide, exp: str) -> list[str]:
    """Hydra overrides of agent_countdown.yaml for `s`; logs and checkpoints under output/`exp`."""
    out = ROOT / "output" / exp
    return [
        f"exp_name={exp}", f"logging_dir={out / 'logs'}", f"output_dir={out}", f"pretrain={s.model}",
        f"seed={s.seed}", f"max_steps={s.steps}", f"save_steps={s.steps}",
        f"rollout_batch_size={s.samples}", f"train_env_manager.num_env_groups={s.prompts}",
        f"train_env_manager.group_size={s.group}", f"actor_infer.generating_args.max_new_tokens={s.max_new_tokens}",
        f"actor_train.training_args.learning_rate={s.learning_rate}",
        f"actor_train.training_args.per_device_train_batch_size={s.micro_batch}",
        f"actor_train.training_args.gradient_accumulation_steps={s.samples // s.micro_batch}",
        # micro-batches of whole samples, as TRL's, instead of the config's token budget
        "actor_train.use_dynamic_batching_in_train=false",
        "drop_zero_gradient_groups=false",  # TRL trains on groups whose answers all scored the same too
        f"report.trajectories_per_step={s.samples}",  # every episode saved: TRL's prompts are read from them
    ]


def trl_arguments(s: SideBySide, output_dir: Path) -> dict:
    """GRPOConfig's arguments for `s`: each value that differs from TRL's default, or that must not move."""
    return dict(
        output_dir=str(output_dir), max_steps=s.steps, seed=s.seed, use_cpu=True, bf16=False, fp16=False,
        num_generations=s.group, per_device_train_batch_size=s.micro_batch,
        gradient_accumulation_steps=s.samples // s.micro_batch,
        steps_per_generation=s.samples // s.micro_batch,  # one generation per optimizer step
        num_iterations=1, max_completion_length=s.max_new_tokens, temperature=1.0, top_p=1.0, top_k=0,
        learning_rate=s.learning_rate, lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0,
        adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-8, optim="adamw_torch_fused", max_grad_norm=1.0,
        beta=0.0, epsilon=0.2, loss_type="grpo", scale_rewards="group", gradient_checkpointing=False,
        shuffle_dataset=False,  # the dataset is in roll's step order
        use_vllm=False, logging_steps=1, save_strategy="no", report_to="none",
    )


TRL_LOSS_AS_ROLL = {"grpo": "seq-mean-token-mean", "dapo": "token-mean"}  # the same aggregation, by roll's name


def roll_settings(roll: AgenticConfig) -> dict[str, object]:
    """The compared settings as the config roll loads has them."""
    train, infer = roll.actor_train, roll.actor_infer
    args, gen = train.training_args, infer.generating_args
    grouping = "group" if roll.reward_normalization.grouping == "traj_group_id" else roll.reward_normalization.grouping
    return {
        "model folder": infer.model_args.model_name_or_path,
        "prompts per step": roll.train_env_manager.num_env_groups,
        "answers per prompt": roll.train_env_manager.group_size,
        "max new tokens": min(gen.max_new_tokens, roll.custom_envs[TAG].max_tokens_per_step),
        "sampling (temperature, top_p, top_k)": (gen.temperature, gen.top_p, gen.top_k),
        "samples per micro-batch": None if train.use_dynamic_batching_in_train else args.per_device_train_batch_size,
        "samples per optimizer step": args.mini_batch_size,
        "optimizer steps per RL step": roll.rollout_batch_size // args.mini_batch_size * roll.ppo_epochs,
        "RL steps": roll.max_steps,
        "learning rate, schedule, warm-up": (args.learning_rate, args.lr_scheduler_type, args.warmup_steps),
        "AdamW (beta1, beta2, eps, weight decay)": (args.adam_beta1, args.adam_beta2, args.adam_epsilon, args.weight_decay),
        "max grad norm": roll.max_grad_norm,
        "clip epsilon (low, high)": (_or(roll.pg_clip_low, roll.pg_clip), _or(roll.pg_clip_high, roll.pg_clip)),
        "KL term (reference model)": roll.uses_reference,
        "loss aggregation": roll.loss_agg_mode,
        "advantage": f"{roll.reward_normalization.method} per {grouping}",
        "groups with equal scores trained": not roll.drop_zero_gradient_groups,
        "dtype (train, generate)": (train.model_args.dtype, infer.model_args.dtype),
        "gradient checkpointing": not train.model_args.disable_gradient_checkpointing,
        "seed": roll.seed,
        # roll's Cluster gives each worker of a role its share of this process's cores; roles take turns
        "torch threads (train, generate)": (max(1, cpu_count() // train.num_workers), max(1, cpu_count() // infer.num_workers)),
    }


def trl_settings(trl: dict, s: SideBySide) -> dict[str, object]:
    """The compared settings as TRL gets them: GRPOConfig's arguments, and the worker loads `s.model`
    and sets `s.threads` itself."""
    per_step = trl["per_device_train_batch_size"] * trl["gradient_accumulation_steps"]
    precision = "fp32" if not (trl["bf16"] or trl["fp16"]) else "mixed"
    return {
        "model folder": s.model,
        "prompts per step": trl["per_device_train_batch_size"] * trl["steps_per_generation"] // trl["num_generations"],
        "answers per prompt": trl["num_generations"],
        "max new tokens": trl["max_completion_length"],
        "sampling (temperature, top_p, top_k)": (trl["temperature"], trl["top_p"], trl["top_k"]),
        "samples per micro-batch": trl["per_device_train_batch_size"],
        "samples per optimizer step": per_step,
        "optimizer steps per RL step": trl["steps_per_generation"] // trl["gradient_accumulation_steps"] * trl["num_iterations"],
        "RL steps": trl["max_steps"],
        "learning rate, schedule, warm-up": (trl["learning_rate"], trl["lr_scheduler_type"], trl["warmup_steps"]),
        "AdamW (beta1, beta2, eps, weight decay)": (trl["adam_beta1"], trl["adam_beta2"], trl["adam_epsilon"], trl["weight_decay"]),
        "max grad norm": trl["max_grad_norm"],
        "clip epsilon (low, high)": (trl["epsilon"], _or(trl.get("epsilon_high"), trl["epsilon"])),
        "KL term (reference model)": trl["beta"] != 0.0,
        "loss aggregation": TRL_LOSS_AS_ROLL.get(trl["loss_type"], trl["loss_type"]),
        "advantage": {"group": "mean_std per group"}.get(trl["scale_rewards"], trl["scale_rewards"]),
        "groups with equal scores trained": True,  # GRPOTrainer has no filter for them
        "dtype (train, generate)": (precision, precision),
        "gradient checkpointing": trl["gradient_checkpointing"],
        "seed": trl["seed"],
        "torch threads (train, generate)": (s.threads, s.threads),
    }


def settings_rows(roll: AgenticConfig, trl: dict, s: SideBySide) -> list[tuple[str, object, object]]:
    """(setting, roll's value, TRL's value)."""
    ours, theirs = roll_settings(roll), trl_settings(trl, s)
    return [(name, value, theirs[name]) for name, value in ours.items()]


def _or(value, default):
    return default if value is None else value


def different_settings(rows: list[tuple[str, object, object]]) -> list[str]:
    return [name for name, roll, trl in rows if roll != trl]


def settings_table(rows: list[tuple[str, object, object]]) -> str:
    lines = ["| setting | roll | TRL |", "|---|---|---|"]
    lines += [f"| {name} | {roll} | {trl} |" for name, roll, trl in rows]
    return "\n".join(lines)


# --- roll's run ------------------------------------------------------------------------------------

def run_roll(overrides: list[str]) -> None:
    """agent_countdown.yaml through roll's launcher; Ray is stopped after it, so no roll process is left
    using the cores while TRL runs."""
    import ray

    from roll.launch.cli import main as launch

    code = launch(["--config-path", str(CONFIG_DIR), "--config-name", CONFIG_NAME, *overrides],
                  default_pipeline="roll.pipeline.agentic.agentic_pipeline.AgenticPipeline")
    ray.shutdown()
    if code:
        raise SystemExit(f"roll's run failed (exit code {code})")


@dataclass
class StepTimes:
    """One RL step of one framework: wall seconds and where they went, and its real tokens."""

    seconds: float
    rollout: float  # generation, rewards, advantages
    train: float  # scoring and the optimizer step's forward/backward passes
    generated_tokens: int
    trained_tokens: int  # prompt + answer tokens of every sample trained on (padding left out)
    sync: float = 0.0  # roll's weight sync to the inference worker; TRL generates with the model it trains

    @property
    def other(self) -> float:
        return self.seconds - self.rollout - self.train - self.sync


def roll_steps(metrics_file: Path) -> list[StepTimes]:
    steps = []
    for row in map(json.loads, metrics_file.read_text().splitlines()):
        total = row["time/step_total"]
        steps.append(StepTimes(
            seconds=total, rollout=row["time/step_rollout"], sync=row["time/step_model_update"],
            train=row["time/step_train"] + row.get("time/step_logprobs", 0.0),
            generated_tokens=int(row["rollout/generated_tokens"]),
            # system/tps is the batch's attention-mask sum over the step's seconds: multiplied back, the token count
            trained_tokens=round(row["system/tps"] * total)))
    return steps


def roll_prompts(logging_dir: Path) -> list[list[dict]]:
    """Per step, one row per GRPO group in roll's order: the chat before the answer, and the env seed."""
    steps: dict[int, dict[str, dict]] = {}
    for episode in load_trajectories(logging_dir):
        if episode["kind"] != "train":
            continue
        messages = episode["messages"]
        first_answer = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
        row = {"prompt": messages[:first_answer], "env_seed": episode["env_seed"]}
        steps.setdefault(episode["step"], {}).setdefault(episode["traj_group_id"], row)
    return [list(steps[step].values()) for step in sorted(steps)]


# --- TRL's run -------------------------------------------------------------------------------------

class RewardServer:
    """Scores TRL's answers with roll's own env, in this process: the TRL worker (which cannot import roll)
    sends (env seed, answer text) pairs over a local socket and gets the env's rewards back. Keeps the
    seeds of every call (one call per generation) to check that TRL played roll's prompts in roll's order."""

    def __init__(self, env_type: str, env_config: dict) -> None:
        self.env_type, self.env_config = env_type, env_config
        self.authkey = secrets.token_bytes(16)
        self.listener = Listener(("127.0.0.1", 0), authkey=self.authkey)
        self.calls: list[list[int]] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def reward(self, seed: int, text: str) -> float:
        env = make_env(self.env_type, **self.env_config)
        env.reset(seed=seed)
        return float(env.step(text)[1])

    def _serve(self) -> None:
        with self.listener.accept() as connection:
            while True:
                try:
                    pairs = connection.recv()
                except EOFError:  # the worker is done
                    return
                self.calls.append([seed for seed, _ in pairs])
                connection.send([self.reward(seed, text) for seed, text in pairs])


def run_trl(python: Path, s: SideBySide, prompts: list[list[dict]], server: RewardServer, folder: Path) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    spec, result = folder / "spec.json", folder / "result.json"
    spec.write_text(json.dumps({
        "model": s.model, "threads": s.threads, "grpo": trl_arguments(s, folder),
        "rows": [row for step in prompts for row in step],
        "reward_address": list(server.listener.address), "reward_authkey": server.authkey.hex(),
    }))
    subprocess.run([str(python), str(ROOT / "benchmarks" / "vs_trl_worker.py"), str(spec), str(result)], check=True)
    return json.loads(result.read_text())


def trl_steps(result: dict) -> list[StepTimes]:
    return [StepTimes(seconds=seconds, rollout=r["seconds"], train=seconds - r["seconds"],
                      generated_tokens=r["generated_tokens"], trained_tokens=r["trained_tokens"])
            for seconds, r in zip(result["step_seconds"], result["rollouts"], strict=True)]


def prompt_token_problems(roll: list[StepTimes], rollouts: list[dict]) -> list[str]:
    """Steps where the prompts came to a different number of tokens (the chat template rendered them otherwise)."""
    counts = [(t.trained_tokens - t.generated_tokens, r["prompt_tokens"]) for t, r in zip(roll, rollouts)]
    return [f"step {step}: {ours} prompt tokens in roll, {theirs} in TRL"
            for step, (ours, theirs) in enumerate(counts, start=1) if ours != theirs]


def prompt_order_problems(prompts: list[list[dict]], calls: list[list[int]], group: int) -> list[str]:
    """Steps where TRL's rewarded answers were not `group` answers to each of roll's prompts of that step."""
    problems = [f"roll ran {len(prompts)} steps, TRL scored {len(calls)} generations"] if len(prompts) != len(calls) else []
    for step, (rows, seeds) in enumerate(zip(prompts, calls), start=1):
        if sorted(seeds) != sorted(row["env_seed"] for row in rows for _ in range(group)):
            problems.append(f"step {step}: roll's env seeds {[r['env_seed'] for r in rows]}, TRL's {sorted(set(seeds))}")
    return problems


# --- the report ------------------------------------------------------------------------------------

@dataclass
class Summary:
    """Steps 2..N of one framework (step 1 warms up allocators and caches): medians of the seconds, and
    tokens/s as the tokens of those steps over the seconds their phase took."""

    seconds: float
    rollout: float
    train: float
    sync: float
    other: float
    generated_per_s: float
    trained_per_s: float

    @classmethod
    def of(cls, steps: list[StepTimes]) -> "Summary":
        steps = steps[1:] or steps
        median = lambda f: statistics.median(f(t) for t in steps)  # noqa: E731
        return cls(median(lambda t: t.seconds), median(lambda t: t.rollout), median(lambda t: t.train),
                   median(lambda t: t.sync), median(lambda t: t.other), sum(t.generated_tokens for t in steps) / sum(t.rollout for t in steps),
                   sum(t.trained_tokens for t in steps) / sum(t.train for t in steps))


def results_table(roll: Summary, trl: Summary, params: int, flops: float) -> str:
    """One line per framework and their ratio; the FLOP limit: 2 × params per generated token and
    6 × params per trained token (forward 2, backward 4) at the measured matmul rate."""
    def cells(x: Summary) -> list[str]:
        return [f"{x.seconds:.1f}", f"{x.rollout:.1f}", f"{x.train:.1f}", f"{x.sync:.1f}", f"{x.other:.1f}", f"{x.generated_per_s:.0f}",
                f"{x.trained_per_s:.0f}", f"{100 * 2 * params * x.generated_per_s / flops:.1f}%",
                f"{100 * 6 * params * x.trained_per_s / flops:.1f}%"]

    ratio = [roll.seconds / trl.seconds, roll.rollout / trl.rollout, roll.train / trl.train, float("nan"), float("nan"),
             roll.generated_per_s / trl.generated_per_s, roll.trained_per_s / trl.trained_per_s]
    header = ["s/step", "rollout s", "train s", "weight sync s", "other s", "generated tok/s", "trained tok/s",
              "generation, % of FLOP limit", "training, % of FLOP limit"]
    lines = ["| | " + " | ".join(header) + " |", "|---|" + "---:|" * len(header),
             "| roll | " + " | ".join(cells(roll)) + " |", "| TRL | " + " | ".join(cells(trl)) + " |",
             "| roll / TRL | " + " | ".join("—" if r != r else f"{r:.2f}×" for r in ratio) + " | | |"]
    return "\n".join(lines)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=6, help="RL steps (one optimizer step each); the table reads steps 2..N")
    parser.add_argument("--prompts", type=int, default=4, help="Countdown puzzles per step")
    parser.add_argument("--group", type=int, default=8, help="answers per puzzle (GRPO group)")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-6)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--model", default=EMBEDDED_MODEL_NAME,
                        help="a model folder or a name roll resolves (default: the embedded SmolLM2)")
    parser.add_argument("--tiny", action="store_true", help=f"use {TINY_MODEL}, a tiny random model, for a quick smoke run")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    python = ensure_trl_venv()
    threads = cpu_count()
    torch.set_num_threads(threads)  # the matmul probe with the threads both runs get
    s = SideBySide(model=resolve_model_path(TINY_MODEL if args.tiny else args.model), steps=args.steps,
                   prompts=args.prompts, group=args.group, max_new_tokens=args.max_new_tokens,
                   learning_rate=args.lr, seed=args.seed, threads=threads)
    exp = f"vs_trl_{int(time.time())}"
    out = ROOT / "output" / exp
    overrides = roll_overrides(s, exp)
    config = load_agentic_config(CONFIG_DIR, CONFIG_NAME, overrides)
    rows = settings_rows(config, trl_arguments(s, out / "trl"), s)
    print(settings_table(rows), flush=True)
    if different_settings(rows):
        print(f"\nsettings differ: {different_settings(rows)}; nothing was run", file=sys.stderr)
        return 1

    load, flops_before = os.getloadavg()[0], matmul_flops()
    start = time.time()
    run_roll(overrides)
    roll, prompts = roll_steps(out / "logs" / "metrics.jsonl"), roll_prompts(out / "logs")
    env = config.custom_envs[TAG]
    server = RewardServer(env.env_type, dict(env.env_config))
    result = run_trl(python, s, prompts, server, out / "trl")
    print(f"\n{Path(s.model).name} ({result['params'] / 1e6:.1f}M params), fp32, torch threads {threads}, "
          f"{s.steps} steps of {s.prompts} prompts × {s.group} answers of ≤ {s.max_new_tokens} tokens; "
          f"TRL {result['versions']['trl']}, transformers {result['versions']['transformers']} in .venv-trl; "
          f"{(time.time() - start) / 60:.1f} min; load avg at start {load:.2f}")
    problems = prompt_order_problems(prompts, server.calls, s.group) + prompt_token_problems(roll, result["rollouts"])
    print("same prompts and prompt tokens each step: " + ("yes" if not problems else "NO: " + "; ".join(problems)))
    flops_after = matmul_flops()
    print(f"matmul: {flops_before / 1e9:.1f} GFLOP/s fp32 before, {flops_after / 1e9:.1f} after (the FLOP limit uses their mean)")
    table = results_table(Summary.of(roll), Summary.of(trl_steps(result)), result["params"], (flops_before + flops_after) / 2)
    print(f"\n{table}")
    print("\nrollout: generation, rewards, advantages; roll's other s: what is left (scheduling, bookkeeping); TRL's "
          "train s: the step minus its rollout. roll / TRL below 1 in the seconds columns, above 1 in tokens/s, favours roll.\n"
          "Trained tokens count every sample's prompt and answer, as a plain forward runs them; roll runs a prompt its "
          "micro-batch shares once (roll/strategies/shared_prefix.py), so its share of the limit may pass 100%.")
    print(f"command: python benchmarks/vs_trl.py {' '.join(argv)}")
    return 1 if problems else 0

if __name__ == "__main__":
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    sys.exit(main(sys.argv[1:]))
