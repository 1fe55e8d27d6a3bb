"""The one table of strategy facts, and the two factories that build a strategy from its name.

Every place that must know something about a strategy name reads it here: config validation (which
names each role accepts, LoRA support), the machine checks run before any worker starts
(`strategy_problem`: CUDA, a missing package, no implementation in roll), the Cluster (strategies
that need one process per rank), the pipeline (the reference scores with a train strategy's forward
pass) and the workers (`create_train_strategy`, `create_infer_strategy`).

Adding a strategy = one `StrategyFacts` row (`register_strategy`) whose `class_path` names the class;
see docs/internals.md, "Extension points". The class is imported only when a worker builds it, so
reading the table never imports a strategy's packages.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from dataclasses import dataclass
from typing import Any, Literal

CPU_EXAMPLE = (
    "python examples/start_agentic_pipeline.py --config-path examples/smollm2-135M-agentic_cpu "
    "--config-name agent_val_frozen_lake"
)


@dataclass(frozen=True)
class StrategyFacts:
    """What roll knows about one `strategy_args.strategy_name`."""

    name: str
    kind: Literal["train", "infer"]
    # "module.Class"; None when roll has no implementation (then `refusal` says why).
    class_path: str | None
    # The name (with a few words on why) proposed whenever this one is refused.
    alternative: str | None = None
    refusal: str | None = None
    needs_cuda: bool = False
    package: str | None = None  # import name of an optional package it needs
    package_title: str | None = None  # its usual spelling, for messages
    install: str | None = None  # how to install that package
    # Train strategies: True when the ranks shard one model, so each rank needs its own process
    # (torch.distributed), False for one process training alone.
    sharded: bool = False
    multi_rank: bool = True  # False: trains in one process only
    lora: bool = False  # supports model_args.lora_rank
    # Infer strategies: True when load_state_dict takes a part of the weights at a time, so the pipeline
    # streams them in buckets (roll/pipeline/agentic/weight_sync.py); False: all of them in one call.
    loads_weights_in_parts: bool = False


STRATEGIES: dict[str, StrategyFacts] = {}

# Which kinds each worker role accepts: the reference only scores log-probs, so either kind works
# (an infer name makes it score with the hf_train forward pass, see `scoring_strategy`).
ROLE_KINDS: dict[str, tuple[str, ...]] = {
    "actor_train": ("train",),
    "critic": ("train",),
    "actor_infer": ("infer",),
    "reference": ("infer", "train"),
}
# The train strategy whose forward pass scores log-probs for a role configured with an infer strategy.
SCORING_STRATEGY = "hf_train"


def register_strategy(facts: StrategyFacts, *, replace: bool = False) -> StrategyFacts:
    """Adds a row; a second row for one name needs replace=True."""
    if facts.name in STRATEGIES and not replace:
        raise ValueError(f"strategy {facts.name!r} is already registered; pass replace=True to override it on purpose")
    if facts.kind not in ("train", "infer"):
        raise ValueError(f"strategy {facts.name!r}: kind must be 'train' or 'infer', got {facts.kind!r}")
    can_be_refused = facts.class_path is None or facts.needs_cuda or facts.package
    if (facts.class_path is None and not facts.refusal) or (can_be_refused and not facts.alternative):
        raise ValueError(f"strategy {facts.name!r}: a row that can be refused needs `alternative` "
                         f"(and `refusal` when class_path is None), so the refusal tells the user what to use")
    STRATEGIES[facts.name] = facts
    return facts


def strategy_names(*kinds: str) -> list[str]:
    """Registered names of the given kinds (all kinds when none is given), in table order."""
    return [name for name, facts in STRATEGIES.items() if not kinds or facts.kind in kinds]


def allowed_strategies(role: str) -> list[str]:
    """The strategy names `role` (actor_train, actor_infer, critic, reference) accepts."""
    return strategy_names(*ROLE_KINDS[role])


def strategy_facts(name: str) -> StrategyFacts:
    if name not in STRATEGIES:
        raise ValueError(f"unknown strategy {name!r}; registered: {strategy_names()}")
    return STRATEGIES[name]


def scoring_strategy(name: str) -> str:
    """The train strategy that computes log-probs for a role configured with strategy `name`."""
    return SCORING_STRATEGY if strategy_facts(name).kind == "infer" else name


def strategy_problem(name: str, cuda: bool) -> str | None:
    """Why strategy `name` cannot run on a machine with (`cuda`) or without a GPU, and what to use
    instead; None when it can."""
    facts = strategy_facts(name)
    missing = facts.package is not None and importlib.util.find_spec(facts.package) is None
    missing_text = f"{facts.package_title or facts.package}, which is not installed: {facts.install}"
    instead = f"Use strategy_name: {facts.alternative}."
    if facts.needs_cuda and not cuda:
        also = f" (it also needs {missing_text})" if missing else ""
        return (f"{name} needs a CUDA GPU and none is visible on this machine{also}. {instead} "
                f"The CPU example runs without a GPU: {CPU_EXAMPLE}")
    if missing:
        return f"{name} needs {missing_text}. {instead}"
    if facts.class_path is None:
        return f"{facts.refusal} {instead}"
    return None


_KIND_WORDS = {"train": "training ", "infer": "inference ", None: ""}


def check_strategy_available(name: str, kind: str | None = None, cuda: bool | None = None) -> StrategyFacts:
    """The facts of `name` when it can run here; otherwise ValueError with the reason and the alternative."""
    if name not in STRATEGIES or (kind and STRATEGIES[name].kind != kind):
        raise ValueError(f"unknown {_KIND_WORDS[kind]}strategy {name!r}; choose one of {runnable_names(kind)}")
    if cuda is None:
        import torch

        cuda = torch.cuda.is_available()
    problem = strategy_problem(name, cuda)
    if problem:
        raise ValueError(problem)
    return STRATEGIES[name]


def runnable_names(kind: str | None = None) -> list[str]:
    """Names with an implementation in roll (whether this machine can run them or not)."""
    return [name for name in strategy_names(*((kind,) if kind else ())) if STRATEGIES[name].class_path]


def _build(facts: StrategyFacts, args: tuple, options: dict[str, Any]) -> Any:
    module_name, _, class_name = facts.class_path.rpartition(".")
    cls = getattr(importlib.import_module(module_name), class_name)
    parameters = inspect.signature(cls.__init__).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        # Each class takes the options it understands (strategy_config only where it has one).
        options = {key: value for key, value in options.items() if key in parameters}
    return cls(*args, **options)


def create_train_strategy(name: str, model_path: str, model_args: Any, training_args: Any, **options: Any) -> Any:
    """The train strategy `name` for one rank. `options`: kind, rank, world_size, num_training_steps,
    dist_addr, strategy_config — each passed when the class's constructor takes it."""
    facts = check_strategy_available(name, "train")
    return _build(facts, (model_path, model_args, training_args), options)


def create_infer_strategy(name: str, model_path: str, **options: Any) -> Any:
    """The inference strategy `name` serving `generate(requests)`. `options`: dtype,
    attn_implementation, device, strategy_config, max_batch_size, max_sessions, seed — each passed when
    the class's constructor takes it."""
    facts = check_strategy_available(name, "infer")
    return _build(facts, (model_path,), options)


_FSDP2 = "fsdp2_train (PyTorch FSDP2: shards parameters, gradients and optimizer state across workers, no extra package)"
_HF_INFER = "hf_infer (transformers on CPU or GPU; token ids and log-probs exactly as training sees them)"
# vLLM pins its own torch and transformers: it gets a second environment (on CPU, vLLM's CPU build).
_VLLM_INSTALL = ("bash scripts/setup_vllm.sh (creates .venv-vllm; vLLM pins its own torch and transformers), "
                 "then run roll with .venv-vllm/bin/python")
for _row in (
    StrategyFacts("hf_infer", "infer", "roll.strategies.hf_infer.HFInferStrategy", loads_weights_in_parts=True),
    StrategyFacts("vllm", "infer", "roll.strategies.vllm_infer.VLLMInferStrategy",
                  alternative=f"{_HF_INFER}, as the CPU example does: {CPU_EXAMPLE}",
                  package="vllm", package_title="vLLM", install=_VLLM_INSTALL),
    StrategyFacts("sglang", "infer", "roll.strategies.sglang_infer.SGLangInferStrategy",
                  alternative=f"vllm (runs on CPU too: {_VLLM_INSTALL}) or {_HF_INFER}",
                  needs_cuda=True, package="sglang", package_title="SGLang", install="pip install 'sglang[all]'"),
    StrategyFacts("megatron_infer", "infer", None, alternative=_HF_INFER,
                  refusal="megatron_infer (ROLL's Megatron-Core forward pass) is not supported by roll."),
    StrategyFacts("deepspeed_infer", "infer", None, alternative=_HF_INFER,
                  refusal="deepspeed_infer (ROLL's DeepSpeed forward pass) is not supported by roll."),
    StrategyFacts("fsdp2_infer", "infer", None, alternative=_HF_INFER,
                  refusal="fsdp2_infer (ROLL's FSDP2 forward pass) is not supported by roll."),
    StrategyFacts("hf_train", "train", "roll.strategies.hf_train.HFTrainStrategy", alternative=_FSDP2,
                  multi_rank=False, lora=True),
    StrategyFacts("fsdp2_train", "train", "roll.strategies.fsdp2_train.FSDP2TrainStrategy",
                  alternative="hf_train (one process)", sharded=True),
    StrategyFacts("deepspeed_train", "train", "roll.strategies.deepspeed_train.DeepSpeedTrainStrategy",
                  alternative=_FSDP2, needs_cuda=False, package="deepspeed", package_title="DeepSpeed",
                  install="pip install 'roll[deepspeed]'", sharded=True),
    StrategyFacts("megatron_train", "train", None, alternative=_FSDP2 + ", which shards the same way for models of this size",
                  refusal="megatron_train is not supported by roll."),
    StrategyFacts("diffusion_deepspeed_train", "train", None, alternative="hf_train or fsdp2_train, for a causal LM",
                  refusal="diffusion_deepspeed_train trains diffusion models, which roll does not support."),
):
    register_strategy(_row)
