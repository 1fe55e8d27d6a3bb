"""Memory per role, estimated from the config and the model's config.json before any worker starts.

Per worker of each role, in bytes (`dtype` bytes per value, fp32 on CPU):
- weights: the model's parameters (counted on the meta device: nothing is loaded);
- trainers (actor_train, critic): fp32 master weights, gradients (one value per trained parameter) and
  AdamW's two moments whatever `dtype` (bf16/fp16 is the compute dtype), plus, under bf16/fp16, the
  weights' copies in that dtype (hf_train's autocast keeps one of every weight during a forward;
  sharded strategies gather one layer at a time, and the embedding and output layer for the whole
  forward); sharded strategies (fsdp2_train, deepspeed) split the rest over their ranks;
- activations of one micro-batch, for backward: about (12·hidden + 4·intermediate) values per token
  per layer (attention inputs and outputs, norms, residuals, the MLP's gate/up/activation), or one
  hidden vector per token per layer plus one layer's worth with gradient checkpointing;
- logits of one micro-batch: where hf_train and fsdp2_train run the output layer chunk by chunk
  (roll/algorithms/head_logprobs.py: Llama-family models), two float32 chunks of ~16M logits;
  otherwise tokens × vocab, kept twice in training (the values and their gradient);
- actor_infer (hf_infer): the decode engine's fixed KV budget, max_num_seqs slots × max_model_len
  tokens (roll/strategies/engine_budget.py: by default one slot per env that talks to the worker at
  once, at most 64, of sequence_length tokens), allocated once and resident once every slot has been
  used; the logits of one engine step, kept twice (logits and their log-softmax), for at most one row
  per running sequence (prefill makes logits only at the position it samples from); and one layer's
  activations of a prefill of max_num_batched_tokens tokens (about 8·hidden + 3·intermediate values
  per token; the attention scores are not counted). vLLM and SGLang size their own cache from
  gpu_memory_utilization: weights only.

A CPU run puts every role in this machine's memory, so their sum must fit it (the smaller of
MemTotal and the cgroup limit); on a GPU each worker must fit its device. The numbers are estimates:
Python, the allocator and Ray add a few hundred MB per process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from roll.algorithms.logprobs import CHUNK_ELEMENTS
from roll.configs.errors import ConfigError
from roll.models.vision import is_vision_language
from roll.strategies.engine_budget import CONFIG_PREFIX, budget_for_run
from roll.strategies.hf_train import PLAIN_HEAD_MODEL_TYPES
from roll.strategies.registry import scoring_strategy

if TYPE_CHECKING:
    from roll.configs.agentic_config import AgenticConfig
    from roll.configs.worker_config import WorkerConfig

GIB = 1024**3
DTYPE_BYTES = {"fp32": 4, "float32": 4, "bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2}
ENGINE_MAX_BATCH = 64  # InferWorker's decode engine: sequences generating at once, at most
SHARDED_STRATEGIES = ("fsdp2_train", "deepspeed_train")
CHUNKED_HEAD_STRATEGIES = ("hf_train", "fsdp2_train")
MASTER_BYTES = 4  # trainers keep fp32 master weights, gradients and AdamW moments whatever the compute dtype


@dataclass
class ModelFacts:
    params: int
    layers: int
    hidden: int
    intermediate: int
    vocab: int
    kv_heads: int
    head_dim: int
    model_type: str = ""


@dataclass
class RoleEstimate:
    """One role's memory per worker (`parts`, bytes), its worker count, and the keys that shrink it."""

    role: str
    workers: int
    parts: dict[str, float]
    keys: list[str] = field(default_factory=list)

    @property
    def per_worker(self) -> float:
        return sum(self.parts.values())

    def describe(self) -> str:
        parts = ", ".join(f"{name} {value / GIB:.2f}" for name, value in self.parts.items() if value >= 0.005 * GIB)
        return f"{self.role} {self.per_worker / GIB:.2f} GiB × {self.workers} ({parts})"


def model_facts(path: str) -> ModelFacts:
    """Parameter count and shapes of the model at `path`, built on the meta device (no weights read)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText

    top = AutoConfig.from_pretrained(path)
    auto = AutoModelForImageTextToText if is_vision_language(top) else AutoModelForCausalLM
    with torch.device("meta"):
        model = auto.from_config(top)
    params = sum(p.numel() for p in model.parameters())  # parameters() lists tied weights once
    cfg = top.get_text_config()  # a vision-language model's shapes are its language model's
    heads = cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    return ModelFacts(params=params, layers=cfg.num_hidden_layers, hidden=cfg.hidden_size,
                      intermediate=getattr(cfg, "intermediate_size", 4 * cfg.hidden_size), vocab=cfg.vocab_size,
                      kv_heads=getattr(cfg, "num_key_value_heads", None) or heads, head_dim=head_dim,
                      model_type=top.model_type)


def micro_batch_tokens(worker: "WorkerConfig", sequence_length: int, training: bool) -> int:
    if training:
        if worker.use_dynamic_batching_in_train and worker.max_tokens_per_microbatch_in_train:
            return worker.max_tokens_per_microbatch_in_train
        return worker.training_args.per_device_train_batch_size * sequence_length
    if worker.use_dynamic_batching_in_infer and worker.max_tokens_per_microbatch_in_infer:
        return worker.max_tokens_per_microbatch_in_infer
    return (worker.infer_batch_size or worker.training_args.per_device_train_batch_size) * sequence_length


def logits_bytes(strategy: str, facts: ModelFacts, tokens: int, copies: int) -> int:
    """Vocabulary-sized memory of one micro-batch: two chunks where the output layer is chunked, else
    `copies` × tokens × vocab float32 values."""
    if strategy in CHUNKED_HEAD_STRATEGIES and facts.model_type in PLAIN_HEAD_MODEL_TYPES:
        return 2 * min(CHUNK_ELEMENTS, tokens * facts.vocab) * 4
    return copies * tokens * facts.vocab * 4


def trainer_estimate(role: str, worker: "WorkerConfig", facts: ModelFacts, sequence_length: int) -> RoleEstimate:
    value = DTYPE_BYTES.get(worker.model_args.dtype, 4)  # the compute dtype: activations, weight copies
    shards = worker.num_workers if worker.strategy_args.strategy_name in SHARDED_STRATEGIES else 1
    trained = 0 if worker.model_args.lora_rank else facts.params  # LoRA adapters are a rounding error
    tokens = micro_batch_tokens(worker, sequence_length, training=True)
    if worker.model_args.disable_gradient_checkpointing:
        per_token_layer = 12 * facts.hidden + 4 * facts.intermediate
        activations = tokens * facts.layers * per_token_layer * value
    else:
        activations = tokens * (facts.layers * facts.hidden + 12 * facts.hidden + 4 * facts.intermediate) * value
    batch_key = (f"{role}.max_tokens_per_microbatch_in_train" if worker.use_dynamic_batching_in_train
                 else f"{role}.training_args.per_device_train_batch_size")
    if value == MASTER_BYTES:
        compute_copies = 0.0
    elif shards > 1 or worker.strategy_args.strategy_name in SHARDED_STRATEGIES:
        compute_copies = (facts.params / facts.layers + 2 * facts.vocab * facts.hidden) * value
    else:
        compute_copies = facts.params * value
    return RoleEstimate(role, worker.num_workers, {
        "weights": facts.params * MASTER_BYTES / shards,
        "grads": trained * MASTER_BYTES / shards,
        "adamw": 2 * trained * MASTER_BYTES / shards,
        "compute_weights": compute_copies,
        "activations": activations,
        # the critic's head is one value per token, not a vocabulary
        "logits": 2 * tokens * 4 if role == "critic" else logits_bytes(worker.strategy_args.strategy_name, facts, tokens, 2),
    }, keys=[batch_key, f"{role}.model_args.disable_gradient_checkpointing=false", "pretrain (a smaller model)"])


def infer_estimate(config: "AgenticConfig", facts: ModelFacts) -> RoleEstimate:
    worker = config.actor_infer
    value = DTYPE_BYTES.get(worker.model_args.dtype, 4)
    parts = {"weights": facts.params * value}
    keys = ["sequence_length", "train_env_manager/val_env_manager num_env_groups × group_size"]
    if worker.strategy_args.strategy_name == "hf_infer":
        budget = budget_for_run(config)
        parts["kv_cache"] = (2 * facts.layers * budget.max_num_seqs * facts.kv_heads * budget.max_model_len
                             * facts.head_dim * value)
        parts["step_logits"] = 2 * min(ENGINE_MAX_BATCH, budget.max_num_seqs) * facts.vocab * 4
        parts["prefill_activations"] = budget.max_num_batched_tokens * (8 * facts.hidden + 3 * facts.intermediate) * value
        keys = [f"{CONFIG_PREFIX}.max_num_seqs (KV slots)", f"{CONFIG_PREFIX}.max_model_len (tokens per slot)",
                f"{CONFIG_PREFIX}.max_num_batched_tokens", *keys]
    return RoleEstimate("actor_infer", worker.num_workers, parts, keys=keys)


def scorer_estimate(worker: "WorkerConfig", facts: ModelFacts, sequence_length: int) -> RoleEstimate:
    value = DTYPE_BYTES.get(worker.model_args.dtype, 4)
    tokens = micro_batch_tokens(worker, sequence_length, training=False)
    return RoleEstimate("reference", worker.num_workers, {"weights": facts.params * value,
                                                         "logits": logits_bytes(scoring_strategy(worker.strategy_args.strategy_name),
                                                                                facts, tokens, copies=1)},
                        keys=["reference.max_tokens_per_microbatch_in_infer"])


def estimate_roles(config: "AgenticConfig") -> list[RoleEstimate]:
    """The estimate of every role the config starts (model paths must already be local folders)."""
    facts: dict[str, ModelFacts] = {}

    def of(worker: "WorkerConfig") -> ModelFacts:
        path = worker.model_args.model_name_or_path
        if path not in facts:
            facts[path] = model_facts(path)
        return facts[path]

    seq = config.sequence_length
    roles = [trainer_estimate("actor_train", config.actor_train, of(config.actor_train), seq),
             infer_estimate(config, of(config.actor_infer))]
    if config.critic is not None and config.uses_critic:
        roles.append(trainer_estimate("critic", config.critic, of(config.critic), seq))
    if config.reference is not None and config.uses_reference:
        roles.append(scorer_estimate(config.reference, of(config.reference), seq))
    return roles


def machine_memory_bytes() -> int:
    """This machine's memory: MemTotal, or the cgroup's limit when that is lower (a container)."""
    total = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                total = int(line.split()[1]) * 1024
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = open(limit_file).read().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < total:
            total = int(text)
    return total


def check_memory(config: "AgenticConfig", cuda: bool) -> list[RoleEstimate]:
    """Raises ConfigError, naming each role's estimate and the keys that shrink it, when the config
    cannot fit this machine: on CPU the sum over roles against RAM, on a GPU each worker against its
    device. Returns the estimates (the launcher logs them)."""
    roles = estimate_roles(config)
    if cuda:
        import torch

        device = torch.cuda.get_device_properties(0).total_memory
        over = [r for r in roles if r.per_worker > device]
        if over:
            raise ConfigError(_too_big(over, f"a worker of {', '.join(r.role for r in over)} cannot fit one GPU, which "
                                             f"has {device / GIB:.1f} GiB"))
        return roles
    available = machine_memory_bytes()
    needed = sum(r.per_worker * r.workers for r in roles)
    if needed > available:
        raise ConfigError(_too_big(roles, f"the roles cannot fit together: this machine has {available / GIB:.1f} GiB "
                                          f"of memory, and they need about {needed / GIB:.1f} GiB"))
    return roles


def _too_big(roles: list[RoleEstimate], problem: str) -> str:
    lines = [f"memory: {problem} (estimate in GiB per worker, see roll/launch/memory_estimate.py):"]
    for role in sorted(roles, key=lambda r: -r.per_worker * r.workers):
        lines.append(f"  {role.describe()}; to lower it change {', '.join(role.keys)}")
    return "\n".join(lines)
