"""TRL's half of benchmarks/vs_trl.py: GRPOTrainer on the prompts roll's run played, timed step by step.

Runs with .venv-trl's python (TRL and its own transformers), started by vs_trl.py; it never imports
roll. It reads one JSON spec (the model folder, GRPOConfig's arguments, the prompts in step order,
where the reward server listens) and writes one JSON result: the wall seconds of every optimizer step,
and per generation its seconds and the tokens generated and trained on.

The rewards come from vs_trl.py's reward server, which scores each answer with roll's CountdownEnv, so
both runs are rewarded by one function.

    .venv-trl/bin/python benchmarks/vs_trl_worker.py SPEC.json RESULT.json
"""

from __future__ import annotations

import json
import sys
import time
from multiprocessing.connection import Client
from pathlib import Path

import torch
import transformers
import trl
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import GRPOConfig, GRPOTrainer


class StepClock(TrainerCallback):
    """Wall seconds of each optimizer step, from the end of the one before (the first from the start of
    training): generation, scoring, every micro-batch and the optimizer step all fall inside."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self._last = 0.0

    def on_train_begin(self, args, state, control, **kwargs):
        self._last = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        now = time.perf_counter()
        self.seconds.append(now - self._last)
        self._last = now


class TimedGRPOTrainer(GRPOTrainer):
    """GRPOTrainer that records each rollout (generation, rewards, advantages: one per optimizer step
    here): its seconds and the real tokens it produced and that training then runs on, padding left out."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.rollouts: list[dict[str, float]] = []

    def _generate_and_score_completions(self, inputs):
        start = time.perf_counter()
        out = super()._generate_and_score_completions(inputs)
        generated, prompt = int(out["completion_mask"].sum()), int(out["prompt_mask"].sum())
        self.rollouts.append({"seconds": time.perf_counter() - start, "generated_tokens": generated,
                              "prompt_tokens": prompt, "trained_tokens": prompt + generated})
        return out


def remote_reward(address: tuple[str, int], authkey: bytes):
    """A reward function for GRPOTrainer that asks the reward server: one round trip per generation."""
    connection = Client(address, authkey=authkey)

    def countdown_env_reward(completions, env_seed, **_):
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        connection.send(list(zip(env_seed, texts)))
        return connection.recv()

    return countdown_env_reward


def main(spec_file: str, result_file: str) -> None:
    spec = json.loads(Path(spec_file).read_text())
    torch.set_num_threads(spec["threads"])
    model = AutoModelForCausalLM.from_pretrained(spec["model"], dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(spec["model"])
    reward = remote_reward(tuple(spec["reward_address"]), bytes.fromhex(spec["reward_authkey"]))
    clock = StepClock()
    trainer = TimedGRPOTrainer(
        model=model, processing_class=tokenizer, reward_funcs=reward, callbacks=[clock],
        args=GRPOConfig(**spec["grpo"]), train_dataset=Dataset.from_list(spec["rows"]),
    )
    trainer.train()
    Path(result_file).write_text(json.dumps({
        "step_seconds": clock.seconds, "rollouts": trainer.rollouts,
        "params": sum(p.numel() for p in model.parameters()), "threads": torch.get_num_threads(),
        "versions": {"trl": trl.__version__, "transformers": transformers.__version__, "torch": torch.__version__},
    }))


if __name__ == "__main__":
    main(*sys.argv[1:3])
