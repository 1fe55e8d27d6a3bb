"""Supervised warm-up before RL: a few SFT steps on episodes played by an env's scripted policy.

Why: a small model may almost never write a parsable action (SmolLM2-135M wrote a valid
`<answer>Move</answer>` in 0 of 96 samples on ROLL's FrozenLake prompt), so RL sees rewards that
barely differ and learns nothing. Episodes of *random valid* moves, rendered with exactly the prompts
and chat template that rollouts use, teach the answer format without teaching the task, so whatever
RL adds afterwards is its own. `policy: optimal` (imitation of a solver) is there for comparison.
`policy: tool` (envs with a Python tool) calls the tool with code that computes the task, then answers
what the tool printed: it teaches the call format and reading the tool's output, and its answers come
only from the tool. Episodes are played by each tag's own env manager (tool messages for the tool env).
An agent runner's tag (ProxyEnvManager) is played by the user's agent itself, its every chat call
answered with a random call of one of the tools that call offered, written in the model's tool-call
format (`random_tool_call`): the warm-up teaches calling the agent's tools, never which call is right.
"""

from __future__ import annotations

import dataclasses
import logging
import random
from typing import Any

from hydra.utils import get_class
from transformers import AutoTokenizer

from roll.agentic.env.policies import TOOL_POLICY, scripted_answer, tool_use_text
from roll.pipeline.agentic.env_manager.proxy_env_manager import ProxyEnvManager
from roll.pipeline.agentic.env_manager.traj_env_manager import TrajEnvManager
from roll.pipeline.agentic.llm_proxy.tool_calls import get_format, parser_for_template, random_tool_call
from roll.pipeline.agentic.trajectory import Trajectory
from roll.pipeline.agentic.trajectory_batch import trajectories_to_batch
from roll.strategies.generation import GenerationRequest, GenerationResult

logger = logging.getLogger("roll.sft_warmup")
SFT_SEED_OFFSET = 7_654_321  # keeps warm-up maps apart from training and validation seeds


class ScriptedProxy:
    """An LLM proxy that answers with the scripted policy of the env its manager is playing."""

    def __init__(self, tokenizer: Any, kind: str, seed: int) -> None:
        self.tokenizer, self.kind = tokenizer, kind
        self.rng = random.Random(seed)
        self.manager: TrajEnvManager | ProxyEnvManager | None = None
        self.tool_format = get_format(parser_for_template(tokenizer.chat_template))

    def generate(self, request: GenerationRequest) -> GenerationResult:
        if request.tools:  # an agent runner's chat call, through roll's OpenAI server
            text = self.tool_format.write(*random_tool_call(request.tools, self.rng))
        elif isinstance(self.manager, ProxyEnvManager):
            raise ValueError("sft_warmup: an agent runner's call offered no tools; the warm-up of an agent runner "
                             "teaches calling its tools, so its agent must pass `tools` (or set sft_warmup.steps=0)")
        elif self.kind == TOOL_POLICY:  # reads the tool's output from the chat, as the model would
            text = tool_use_text(self.manager.env, request.messages[-1]["content"] if request.messages else "")
        else:
            text = f"<answer>{scripted_answer(self.manager.env, self.kind, self.rng)}</answer>"
        ids = self.tokenizer.encode(text, add_special_tokens=False) + [self.tokenizer.eos_token_id]
        return GenerationResult(request_id=request.request_id, output_ids=ids, logprobs=[0.0] * len(ids),
                                finish_reason="stop")

    def release(self, session_id: str) -> None:
        pass


def scripted_trajectories(config, tokenizer: Any, count: int, step: int) -> list[Trajectory]:
    """`count` episodes of the scripted policy, cycling over the warm-up tags."""
    warmup = config.sft_warmup
    tags = warmup.tags or config.train_env_manager.tags
    proxy = ScriptedProxy(tokenizer, warmup.policy, seed=config.seed + step)
    # the scripted policy plays every turn: the run's exploration would replace its moves by random ones
    manager_config = dataclasses.replace(config.train_env_manager, random_action_rate=0.0)
    trajectories = []
    for i in range(count):
        tag = tags[i % len(tags)]
        manager_cls = get_class(config.custom_envs[tag].env_manager_cls)  # the tag's own (tool messages, ...)
        manager = manager_cls(tag, config.custom_envs[tag], manager_config, tokenizer, proxy,
                              config.sequence_length, env_id=i)
        proxy.manager = manager
        seed = config.seed + SFT_SEED_OFFSET + step * count + i
        for sample in manager.run_episode(seed, episode_key=f"sft{step}"):
            sample.traj_id = sample.traj_group_id = f"sft-{step}-{i}"
            trajectories.append(sample)
    return trajectories


def run_sft_warmup(config, actor_train, tracker) -> dict[str, float]:
    """Runs `sft_warmup.steps` supervised steps on actor_train; logs and returns the last step's metrics."""
    warmup = config.sft_warmup
    tokenizer = AutoTokenizer.from_pretrained(config.actor_train.model_args.model_name_or_path)
    metrics: dict[str, float] = {}
    first_loss = None
    for step in range(warmup.steps):
        trajectories = scripted_trajectories(config, tokenizer, warmup.episodes_per_step, step)
        batch = trajectories_to_batch(trajectories, tokenizer.pad_token_id)
        inputs = batch.select(["input_ids", "attention_mask", "position_ids", "response_mask"])
        results = actor_train.dispatch_batch("sft_step", inputs, learning_rate=warmup.learning_rate,
                                             max_grad_norm=config.max_grad_norm)
        metrics = {k: sum(r[k] for r in results) / len(results) for k in results[0]}
        first_loss = metrics["sft/loss"] if first_loss is None else first_loss
        logger.info("sft warm-up step %d/%d: loss %.4f", step + 1, warmup.steps, metrics["sft/loss"])
    actor_train.execute_all("end_sft_warmup")  # its AdamW moments would stay on the heap all run
    metrics["sft/first_loss"] = first_loss if first_loss is not None else float("nan")
    tracker.log(metrics, 0)
    return metrics
