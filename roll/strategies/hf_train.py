"""`hf_train`: a transformers model trained with plain PyTorch in one process (CPU or one GPU).

The strategy owns the model, AdamW and the lr scheduler, and offers the few operations a worker needs:
`forward` on a micro-batch, `backward`, `optimizer_step` (clip, step, schedule), full state dicts for
weight sync and checkpoints, and `save`/`load`. Master weights stay fp32; `dtype: bf16|fp16` runs the
forward/backward under autocast. `fsdp2_train` (fsdp2_train.py) extends it across processes.
"""

from __future__ import annotations

import contextlib
import logging
import math
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from transformers import AutoConfig, AutoModelForTokenClassification, get_scheduler

from roll.algorithms.head_logprobs import head_logprobs_for_input_ids
from roll.configs.worker_config import ModelArgs, TrainingArgs
from roll.data.micro_batch import MicroBatch
from roll.models.vision import load_lm, rope_position_ids
from roll.strategies.shared_prefix import forward_in_prefix_groups, plan_prefix_groups
from roll.utils.checkpoint import load_safetensors_dir
from roll.utils.weight_checksum import state_checksums

logger = logging.getLogger(__name__)

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
SCHEDULERS = ("constant", "linear", "cosine")
ATTN_ALIASES = {"fa2": "flash_attention_2"}
# Causal LMs whose logits are exactly lm_head(final hidden states), nothing applied after it.
PLAIN_HEAD_MODEL_TYPES = ("llama", "qwen2", "qwen3", "mistral")


def default_device() -> torch.device:
    # Ray sets CUDA_VISIBLE_DEVICES to the worker's own GPU, so the first visible device is ours.
    return torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")


def build_model(model_path: str, kind: str, model_args: ModelArgs) -> nn.Module:
    """The fp32 model to train: a causal LM or vision-language model (`kind="causal_lm"`), or a scalar
    value head (`kind="value"`)."""
    if model_args.dtype not in DTYPES:
        raise ValueError(f"model_args.dtype must be one of {sorted(DTYPES)}, got {model_args.dtype!r}")
    attn = ATTN_ALIASES.get(model_args.attn_implementation, model_args.attn_implementation) or "sdpa"
    common: dict[str, Any] = {"dtype": torch.float32, "attn_implementation": attn}
    if kind == "causal_lm":
        model = load_lm(model_path, **common)
    elif kind == "value":
        # classifier_dropout=0: the default 0.1 dropout would make values differ between passes.
        config = AutoConfig.from_pretrained(model_path, num_labels=1)
        config.classifier_dropout = 0.0
        model = AutoModelForTokenClassification.from_pretrained(model_path, config=config, **common)
    else:
        raise ValueError(f"model kind must be 'causal_lm' or 'value', got {kind!r}")
    model.config.use_cache = False
    if model_args.lora_rank:
        model = apply_lora(model, model_args, kind)
    freeze_modules(model, model_args.freeze_module_prefix)
    if not model_args.disable_gradient_checkpointing:
        # transformers 5.20 renamed gradient_checkpointing_enable; .venv-vllm has an older one (vLLM pins it)
        enable = getattr(model, "activation_checkpointing_enable", None)
        if enable is not None:
            enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if model_args.lora_rank:
            model.enable_input_require_grads()
    return model


def freeze_modules(model: nn.Module, prefixes: str | list[str] | None) -> None:
    """ROLL's freeze_module_prefix: parameters whose names start with one of the prefixes do not train."""
    if not prefixes:
        return
    if isinstance(prefixes, str):
        prefixes = [p.strip() for p in prefixes.split(",") if p.strip()]
    frozen = 0
    for name, param in model.named_parameters():
        if any(name.startswith(prefix) for prefix in prefixes):
            param.requires_grad_(False)
            frozen += 1
    if frozen == 0:
        raise ValueError(f"model_args.freeze_module_prefix {prefixes} matches no parameter; names look like "
                         f"{next(iter(dict(model.named_parameters())), '?')!r}")


def apply_lora(model: nn.Module, model_args: ModelArgs, kind: str) -> nn.Module:
    from peft import LoraConfig, get_peft_model

    target = model_args.lora_target or "all-linear"
    if isinstance(target, str) and target != "all-linear":
        target = [t.strip() for t in target.split(",") if t.strip()]
    config = LoraConfig(
        r=model_args.lora_rank,
        lora_alpha=model_args.lora_alpha or model_args.lora_rank,
        lora_dropout=model_args.lora_dropout,
        target_modules=target,
        # The value head is new, so it trains in full beside the adapters.
        modules_to_save=["score"] if kind == "value" else None,
        task_type="CAUSAL_LM" if kind == "causal_lm" else "TOKEN_CLS",
    )
    return get_peft_model(model, config)


def build_optimizer(model: nn.Module, training_args: TrainingArgs, fused: bool = True) -> torch.optim.Optimizer:
    """AdamW over the trainable parameters. `fused`: one kernel for all of them (measured 4.7× faster
    than the per-tensor `foreach` path on CPU for 135M parameters); sharded (DTensor) runs use foreach."""
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW(
        params,
        fused=fused,
        foreach=None if fused else True,
        lr=training_args.learning_rate,
        betas=(training_args.adam_beta1, training_args.adam_beta2),
        eps=training_args.adam_epsilon,
        weight_decay=training_args.weight_decay,
    )


def build_scheduler(optimizer: torch.optim.Optimizer, training_args: TrainingArgs, num_training_steps: int | None):
    kind = training_args.lr_scheduler_type
    if kind not in SCHEDULERS:
        raise ValueError(f"training_args.lr_scheduler_type must be one of {SCHEDULERS}, got {kind!r}")
    if kind != "constant" and not num_training_steps:
        raise ValueError(
            f"lr_scheduler_type={kind!r} decays over the run, so the worker needs num_training_steps "
            "(optimizer steps in the whole run); pass it when building the cluster"
        )
    name = "constant_with_warmup" if kind == "constant" else kind
    warmup = training_args.warmup_steps
    if not warmup and training_args.warmup_ratio and num_training_steps:
        warmup = math.ceil(training_args.warmup_ratio * num_training_steps)
    return get_scheduler(name, optimizer, num_warmup_steps=warmup, num_training_steps=num_training_steps)


def apply_configured_learning_rate(optimizer: torch.optim.Optimizer, scheduler: Any, learning_rate: float) -> None:
    """After a resume: the config's learning rate replaces the checkpoint's, at the schedule's current point.

    Loading the scheduler and optimizer state brings back the learning rate the checkpoint was trained
    with, so without this a `learning_rate=` override on a resumed run would be silently ignored. The
    schedule's position (warm-up, decay) stays the checkpoint's; only its peak changes."""
    saved = list(scheduler.base_lrs)
    if all(math.isclose(lr, learning_rate, rel_tol=1e-9) for lr in saved):
        return
    logger.warning("resume: learning rate %g from the config replaces the checkpoint's %g", learning_rate, saved[0])
    scheduler.base_lrs = [learning_rate] * len(saved)
    for group, factor in zip(optimizer.param_groups, scheduler.lr_lambdas):
        group["initial_lr"] = learning_rate
        group["lr"] = learning_rate * factor(scheduler.last_epoch)
    scheduler._last_lr = [group["lr"] for group in optimizer.param_groups]


class HFTrainStrategy:
    name = "hf_train"
    fused_optimizer = True

    def __init__(
        self,
        model_path: str,
        model_args: ModelArgs,
        training_args: TrainingArgs,
        *,
        kind: str = "causal_lm",
        rank: int = 0,
        world_size: int = 1,
        num_training_steps: int | None = None,
        dist_addr: tuple[str, int] | None = None,
    ) -> None:
        self.model_args, self.training_args, self.kind = model_args, training_args, kind
        self.rank, self.world_size = rank, world_size
        self.device = default_device()
        self.compute_dtype = DTYPES.get(model_args.dtype, torch.float32)
        self.setup_distributed(dist_addr)
        self.model = build_model(model_path, kind, model_args)
        self.wrap_model()
        self.optimizer = build_optimizer(self.model, training_args, fused=self.fused_optimizer)
        self.scheduler = build_scheduler(self.optimizer, training_args, num_training_steps)

    # --- hooks that fsdp2_train overrides -------------------------------------------------------
    def setup_distributed(self, dist_addr: tuple[str, int] | None) -> None:
        pass

    def wrap_model(self) -> None:
        self.model.to(self.device)

    def close(self) -> None:
        pass

    def all_reduce(self, values: list[float], op: str = "sum") -> list[float]:
        """Sums (or maxima) over data-parallel ranks; the identity in one process."""
        return list(values)

    def loss_scale(self) -> float:
        """Factor on each micro-batch loss so that the reduced gradient is the global mini-batch's."""
        return 1.0

    # --- compute ----------------------------------------------------------------------------------
    def autocast(self) -> contextlib.AbstractContextManager:
        if self.compute_dtype == torch.float32:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.compute_dtype)

    def _model_inputs(self, mb: MicroBatch) -> dict:
        inputs = {k: (v.to(self.device) if isinstance(v, Tensor) else v) for k, v in mb.model_inputs().items()}
        if mb.vision is not None:  # images in the rows: the model's 3-D rope positions replace the 1-D ones
            inputs["position_ids"], _ = rope_position_ids(self.model, inputs["input_ids"], inputs["image_grid_thw"],
                                                          mb.row_lengths())
        return inputs

    def forward(self, mb: MicroBatch) -> Tensor:
        """Logits `[rows, width, vocab]` (value models: `[rows, width, 1]`) in fp32."""
        inputs = self._model_inputs(mb)
        with self.autocast():
            return self.model(**inputs).logits.float()

    def forward_hidden(self, mb: MicroBatch) -> tuple[Tensor, nn.Linear] | None:
        """The final hidden states `[rows, width, hidden]` and the output layer, so the caller makes
        log-probs chunk by chunk (roll/algorithms/head_logprobs.py) and `[rows, width, vocab]` logits
        never exist. None where that is not the model's own arithmetic: a value model, an output layer
        that is not a plain Linear (LoRA on lm_head), or an architecture that transforms its logits
        after lm_head (soft-capping, scaling; only the families below are known not to)."""
        head = self.model.get_output_embeddings() if self.kind == "causal_lm" else None
        if type(head) is not nn.Linear or self.model.config.model_type not in PLAIN_HEAD_MODEL_TYPES:
            return None
        inputs = self._model_inputs(mb)
        # rows with images run whole: a shared prefix's cache would need the images' features sliced with it
        groups = plan_prefix_groups(mb) if self.can_share_prefix() and mb.vision is None else None
        # the model's own forward with lm_head swapped for the identity: its "logits" are the hidden states
        self.model.set_output_embeddings(nn.Identity())
        try:
            with self.autocast():
                hidden = forward_in_prefix_groups(self.model, inputs, groups) if groups else self.model(**inputs).logits
        finally:
            self.model.set_output_embeddings(head)
        return hidden, head

    def forward_token_logprobs(self, mb: MicroBatch, with_entropy: bool,
                               label_mask: Tensor | None = None) -> tuple[Tensor, Tensor | None] | None:
        """Token-aligned log-probs `[rows, width]` (and entropies, or None) of the micro-batch's own
        tokens, the output layer run chunk by chunk (head_logprobs_for_input_ids), so no
        `[rows, width, vocab]` logits exist; `label_mask` `[rows, width]`: only those tokens (the rest
        0). None where forward_hidden is None: the caller then uses `forward`'s full logits."""
        split = self.forward_hidden(mb)
        if split is None:
            return None
        hidden, head = split
        return head_logprobs_for_input_ids(hidden, head, mb.input_ids.to(hidden.device), with_entropy,
                                           dtype=self.compute_dtype, label_mask=label_mask)

    def can_share_prefix(self) -> bool:
        """Whether a micro-batch's shared prompt may run once (roll/strategies/shared_prefix.py): it needs the
        model's KV cache, which transformers turns off while training under gradient checkpointing."""
        training = self.model.training and torch.is_grad_enabled()
        # transformers 5.20 renamed the flag; .venv-vllm's older transformers has only the old name
        name = "is_activation_checkpointing" if hasattr(self.model, "is_activation_checkpointing") else "is_gradient_checkpointing"
        return not (training and getattr(self.model, name, False))

    def backward(self, loss: Tensor) -> None:
        (loss * self.loss_scale()).backward()

    def optimizer_step(self, max_grad_norm: float | None) -> float:
        """Clips gradients (when max_grad_norm > 0), steps AdamW and the schedule; returns the grad norm."""
        params = [p for p in self.model.parameters() if p.requires_grad]
        limit = max_grad_norm if max_grad_norm and max_grad_norm > 0 else math.inf
        norm = torch.nn.utils.clip_grad_norm_(params, limit)
        if hasattr(norm, "full_tensor"):
            norm = norm.full_tensor()
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(norm)

    @property
    def lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    # --- state ------------------------------------------------------------------------------------
    def live_weights(self, names: list[str] | None = None) -> dict[str, Tensor]:
        """Every parameter and buffer of the trained module (LoRA: adapter keys), detached, not copied;
        only `names` when given. For a reader that copies them before the next update (a streamed
        weight sync: TrainWorker.get_weight_bucket)."""
        live = self.model.state_dict()
        return {k: live[k].detach() for k in (live if names is None else names)}

    def full_state_dict(self, names: list[str] | None = None) -> dict[str, Tensor]:
        """live_weights copied to the CPU, on rank 0; only `names` when given, so a part is copied
        without the rest."""
        return {k: v.cpu().clone() for k, v in self.live_weights(names).items()}

    def inference_state_dict(self, names: list[str] | None = None) -> dict[str, Tensor]:
        """Weights named as in the plain HF model (LoRA merged in), for the inference engine; only
        `names` (from inference_weight_bytes, which gives none with LoRA) when given."""
        state = self.full_state_dict(names)
        return merge_lora_state(self.model, state) if self.model_args.lora_rank and names is None else state

    def inference_weight_checksums(self, dtype: torch.dtype) -> dict[str, int]:
        """Checksums of the weights inference_state_dict returns (roll/utils/weight_checksum.py), read in
        place: a copy of the model costs 30x the checksums' time (3.3 s against 0.1 s for 135M weights).
        Only where inference_weight_bytes is known: this rank holds the plain model (no LoRA, no shards)."""
        return state_checksums(self.model.state_dict(), dtype)

    def inference_weight_bytes(self) -> dict[str, int] | None:
        """Size of each weight inference_state_dict returns, in its order; None with LoRA (merging a
        delta needs the whole adapter, so the weights go in one piece)."""
        if self.model_args.lora_rank:
            return None
        return {k: v.numel() * v.element_size() for k, v in self.model.state_dict().items()}

    def load_full_state_dict(self, state: dict[str, Tensor]) -> None:
        missing, unexpected = self.model.load_state_dict(state, strict=False)
        check_loaded_keys(self.model, missing, unexpected)

    def optimizer_state(self) -> dict:
        return self.optimizer.state_dict()

    def load_optimizer_state(self, state: dict) -> None:
        self.optimizer.load_state_dict(state)

    def save(self, directory: Path, tokenizer: Any = None) -> None:
        """Hugging Face files (LoRA: the adapter) + optimizer and scheduler state, written by rank 0."""
        state, optim = self.full_state_dict(), self.optimizer_state()
        if self.rank != 0:
            return
        directory.mkdir(parents=True, exist_ok=True)
        # peft's save_pretrained keeps only the adapter keys of the state dict it is given.
        self.model.save_pretrained(directory, state_dict=state)
        if tokenizer is not None:
            tokenizer.save_pretrained(directory)
        torch.save({"optimizer": optim, "scheduler": self.scheduler.state_dict()}, directory / "optimizer.pt")

    def load(self, directory: Path) -> None:
        if self.model_args.lora_rank:
            self.load_lora(directory)
        else:
            self.load_full_state_dict(load_safetensors_dir(directory))
        saved = torch.load(directory / "optimizer.pt", map_location="cpu", weights_only=False)
        self.load_optimizer_state(saved["optimizer"])
        # Every rank's scheduler is identical, so rank 0's file serves all.
        self.scheduler.load_state_dict(saved["scheduler"])
        apply_configured_learning_rate(self.optimizer, self.scheduler, self.training_args.learning_rate)

    def load_lora(self, directory: Path) -> None:
        from peft import set_peft_model_state_dict

        result = set_peft_model_state_dict(self.model, load_safetensors_dir(directory))
        if result.unexpected_keys:
            raise ValueError(f"the LoRA checkpoint in {directory} has keys this model lacks: {result.unexpected_keys[:5]}")


def check_loaded_keys(model: nn.Module, missing: list[str], unexpected: list[str]) -> None:
    # save_pretrained leaves out tied weights (lm_head = embed_tokens), which stay tied on load.
    tied = set(getattr(model, "_tied_weights_keys", None) or {})
    missing = [k for k in missing if k not in tied and not any(k.endswith(t) for t in tied)]
    if missing or unexpected:
        raise ValueError(f"checkpoint does not match the model: missing {missing[:5]}, unexpected {unexpected[:5]}")


def merge_lora_state(model: nn.Module, state: dict[str, Tensor]) -> dict[str, Tensor]:
    """A peft model's weights as the plain model names them, each LoRA delta added to its base weight.

    Not peft's merge_adapter / unmerge_adapter: unmerging subtracts the delta again, which in floating
    point does not give the frozen base weights back bit for bit (on the tiny test model 4 tensors
    moved by up to 7e-9), so every weight sync would drift the base. The delta goes onto a copy instead.
    """
    from peft.tuners.lora import LoraLayer

    prefix = "base_model.model."
    deltas = {}
    for name, module in model.named_modules():
        if isinstance(module, LoraLayer):
            for adapter in module.active_adapters:
                delta = module.get_delta_weight(adapter).detach().cpu()
                key = f"{name}.base_layer.weight"
                deltas[key] = deltas.get(key, 0) + delta
    merged = {}
    for key, value in state.items():
        if "lora_" in key or ".original_module." in key:
            continue
        if key in deltas:
            value = value + deltas[key]
        clean = key[len(prefix):] if key.startswith(prefix) else key
        merged[clean.replace(".base_layer.", ".").replace(".modules_to_save.default.", ".")] = value
    return merged
