"""`deepspeed_train`: the hf_train model trained by a DeepSpeed engine (ZeRO stages 0-3, optional offload).

The strategy builds the same fp32 model, AdamW and lr schedule as hf_train (roll's training_args), hands
them to `deepspeed.initialize`, and runs forward, backward and the optimizer step through the engine.
`strategy_args.strategy_config` is the DeepSpeed config (roll_deepspeed_config below says which keys roll
fills in). Accumulation is roll's: DeepSpeed runs with `managed_gradient_accumulation: false`, so every
`backward` only accumulates and `optimizer_step` is the boundary, whatever the micro-batch count
(dynamic batching, packing). Checkpoints hold DeepSpeed's own files (ZeRO partitions, optimizer,
schedule) under `deepspeed/` plus the full weights as a Hugging Face folder.

Nothing is compiled: the optimizer is torch's AdamW (no DeepSpeed optimizer op) and the one op DeepSpeed
would build on CPU at process-group start, unused by training, is skipped (skip_unused_shm_comm_op).
Should a user's config need a compiled op, it builds once per machine into EXTENSIONS_DIR with the
`ninja` pinned by the `roll[deepspeed]` extra (prepare_extension_builds).
"""

from __future__ import annotations

import copy
import importlib.util
import math
import os
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

from roll.configs.worker_config import ModelArgs, TrainingArgs
from roll.data.micro_batch import MicroBatch
from roll.strategies.fsdp2_train import all_reduce_values, join_process_group
from roll.strategies.hf_train import (
    apply_configured_learning_rate,
    build_model,
    build_optimizer,
    build_scheduler,
    default_device,
)

AUTO = "auto"
DEFAULT_ZERO = {"stage": 2}
EXTENSIONS_DIR = Path(os.environ.get("XDG_CACHE_HOME", "~/.cache")).expanduser() / "roll" / "torch_extensions"
CHECKPOINT_SUBDIR, CHECKPOINT_TAG = "deepspeed", "state"
# Sections roll owns: DeepSpeed would otherwise build a second optimizer or schedule beside roll's.
ROLL_OWNED = {
    "optimizer": "training_args (learning_rate, adam_beta1/2, adam_epsilon, weight_decay)",
    "scheduler": "training_args (lr_scheduler_type, warmup_steps)",
}


def deepspeed_missing_reason() -> str | None:
    if importlib.util.find_spec("deepspeed") is None:
        return (
            "strategy 'deepspeed_train' needs DeepSpeed, which is not installed here: pip install 'roll[deepspeed]' "
            "(or use strategy_name: fsdp2_train, which shards the same way with PyTorch alone)"
        )
    return None


def roll_deepspeed_config(
    strategy_config: dict | None, training_args: TrainingArgs, model_args: ModelArgs, world_size: int
) -> dict[str, Any]:
    """The DeepSpeed config for `strategy_config`, with what roll already states filled in.

    Batch sizes come from training_args, precision from model_args.dtype, clipping from max_grad_norm
    (set at every step); each may be left out or written `auto`, and a different value is an error,
    so the user states each setting once. ZeRO keys written `auto` take DeepSpeed's defaults.
    """
    config = copy.deepcopy(dict(strategy_config or {}))
    for key, owner in ROLL_OWNED.items():
        if key in config:
            raise ValueError(f"strategy_config.{key} is not used; roll builds it from {owner}. Remove it.")
    micro, accum = training_args.per_device_train_batch_size, training_args.gradient_accumulation_steps
    derived = {"train_micro_batch_size_per_gpu": micro, "gradient_accumulation_steps": accum,
               "train_batch_size": micro * accum * world_size}
    for key, value in derived.items():
        given = config.get(key, AUTO)
        if given != AUTO and given != value:
            raise ValueError(
                f"strategy_config.{key} is {given!r} but training_args make it {value} "
                f"(per_device_train_batch_size={micro}, gradient_accumulation_steps={accum}, {world_size} ranks); "
                f"set it in training_args and write `{key}: auto` or leave it out"
            )
        config[key] = value
    if config.get("gradient_clipping", AUTO) != AUTO:
        raise ValueError(
            "strategy_config.gradient_clipping is not used; roll clips with max_grad_norm on every "
            "strategy (so DeepSpeed's own default of 1.0 cannot differ from it). Set max_grad_norm and write "
            "`gradient_clipping: auto` or leave it out"
        )
    config["gradient_clipping"] = 0.0  # optimizer_step sets the step's max_grad_norm
    for section in ("bf16", "fp16"):
        values = dict(config.get(section) or {})
        wanted = model_args.dtype == section
        if values.get("enabled", AUTO) not in (AUTO, wanted):
            raise ValueError(
                f"strategy_config.{section}.enabled is {values['enabled']!r} but model_args.dtype is "
                f"{model_args.dtype!r}; choose the precision with model_args.dtype and write `enabled: auto`"
            )
        config[section] = {**values, "enabled": wanted}
    zero = {k: v for k, v in dict(config.get("zero_optimization") or DEFAULT_ZERO).items() if v != AUTO}
    if zero.get("stage", 0) not in (0, 1, 2, 3):
        raise ValueError(f"strategy_config.zero_optimization.stage must be 0, 1, 2 or 3, got {zero['stage']!r}")
    config["zero_optimization"] = zero
    # roll's worker owns accumulation: backward() only accumulates and step() is the boundary.
    config["managed_gradient_accumulation"] = False
    config.setdefault("zero_allow_untested_optimizer", True)  # roll's optimizer is torch's AdamW
    config.setdefault("zero_force_ds_cpu_optimizer", False)  # ... also with optimizer offload
    config.setdefault("steps_per_print", 2**31 - 1)
    return config


def prepare_extension_builds() -> None:
    """DeepSpeed's JIT-compiled ops go to one fixed folder per machine and build with the pinned ninja."""
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(EXTENSIONS_DIR))
    try:
        import ninja
    except ImportError:
        return  # torch then looks for ninja on PATH and says so if there is none
    path = os.environ.get("PATH", "")
    if not path.startswith(ninja.BIN_DIR + os.pathsep):
        os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + path


def skip_unused_shm_comm_op() -> None:
    """Keeps DeepSpeed from compiling its shared-memory all-reduce (minutes on CPU) at process-group start.

    Only tensor-parallel inference calls that op (`inference_all_reduce`); ZeRO's collectives are
    torch.distributed's. Marked unavailable, the op is never built and that one call uses torch too.
    """
    import deepspeed.ops
    from deepspeed.accelerator import get_accelerator

    builder = get_accelerator().create_op_builder("ShareMemCommBuilder")
    if builder is not None:
        deepspeed.ops.__compatible_ops__[builder.NAME] = False


class DeepSpeedTrainStrategy:
    """One data-parallel rank of a DeepSpeed engine; the interface of HFTrainStrategy."""

    name = "deepspeed_train"

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
        strategy_config: dict | None = None,
    ) -> None:
        reason = deepspeed_missing_reason()
        if reason:
            raise ValueError(reason)
        if model_args.lora_rank:
            raise ValueError("LoRA (model_args.lora_rank) is supported with hf_train only for now; use strategy_name: hf_train")
        self.model_args, self.training_args, self.kind = model_args, training_args, kind
        self.rank, self.world_size = rank, world_size
        self.device = default_device()
        self.ds_config = roll_deepspeed_config(strategy_config, training_args, model_args, world_size)
        prepare_extension_builds()
        if self.device.type == "cpu":
            skip_unused_shm_comm_op()
        # Each worker sees only its own device, so it is local rank 0 (DeepSpeed requires the variable).
        os.environ["LOCAL_RANK"] = "0"
        join_process_group(self.device, rank, world_size, dist_addr, self.name)
        import deepspeed

        model = build_model(model_path, kind, model_args).to(self.device)
        self.torch_optimizer = build_optimizer(model, training_args, fused=True)
        scheduler = build_scheduler(self.torch_optimizer, training_args, num_training_steps)
        self.engine, _, _, self.scheduler = deepspeed.initialize(
            model=model, optimizer=self.torch_optimizer, lr_scheduler=scheduler, config=self.ds_config,
            dist_init_required=False,
        )
        self.model = self.engine.module
        self.zero_stage = self.engine.zero_optimization_stage()
        self._max_grad_norm = 0.0
        self._grad_norm = math.nan
        if self.engine.optimizer is self.torch_optimizer:
            # Stage 0 in fp32 steps torch's optimizer directly, with gradients already averaged over
            # ranks; clip there exactly as hf_train does (DeepSpeed would not report the norm).
            self.torch_optimizer.register_step_pre_hook(self._clip_before_step)

    # --- the interface the workers use -----------------------------------------------------------
    def close(self) -> None:
        import deepspeed.comm

        self.engine.destroy()
        if dist.is_initialized():
            # Through DeepSpeed, which then forgets the groups it cloned from this one: a later
            # strategy in this process starts from a clean slate.
            deepspeed.comm.destroy_process_group()

    def all_reduce(self, values: list[float], op: str = "sum") -> list[float]:
        return all_reduce_values(values, op, self.device)

    def forward(self, mb: MicroBatch) -> Tensor:
        """Logits `[rows, width, vocab]` (value models: `[rows, width, 1]`) in fp32."""
        inputs = {k: (v.to(self.device) if isinstance(v, Tensor) else v) for k, v in mb.model_inputs().items()}
        return self.engine(**inputs).logits.float()

    def backward(self, loss: Tensor) -> None:
        # DeepSpeed averages gradients over ranks; losses already divide by whole-mini-batch counts,
        # so undo the average. Accumulation is roll's, so no division by gradient_accumulation_steps.
        self.engine.backward(loss * self.world_size, scale_wrt_gas=False)

    def optimizer_step(self, max_grad_norm: float | None) -> float:
        """Reduces the accumulated gradients, clips them to max_grad_norm (≤ 0 or None: no clipping),
        steps AdamW and the schedule; returns the gradient norm before clipping."""
        self._max_grad_norm = max_grad_norm if max_grad_norm and max_grad_norm > 0 else 0.0
        if self.engine.optimizer is not self.torch_optimizer:
            # ZeRO and DeepSpeed's mixed-precision optimizers read their limit from this attribute at every step.
            self.engine.optimizer.clip_grad = self._max_grad_norm
        self.engine.step()
        if self.engine.optimizer is self.torch_optimizer:
            return self._grad_norm
        norm = self.engine.get_global_grad_norm()
        return float(norm) if norm is not None else math.nan

    def _clip_before_step(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        params = [p for group in optimizer.param_groups for p in group["params"]]
        limit = self._max_grad_norm or math.inf
        self._grad_norm = float(torch.nn.utils.clip_grad_norm_(params, limit))

    @property
    def lr(self) -> float:
        return float(self.torch_optimizer.param_groups[0]["lr"])

    # --- state ------------------------------------------------------------------------------------
    def full_state_dict(self) -> dict[str, Tensor]:
        """Every parameter and buffer, on CPU, on rank 0 (ZeRO-3: gathered layer by layer; collective)."""
        if self.zero_stage == 3:
            # Parameters small enough to stay whole on every rank come back as the live tensors: copy.
            state = self.engine._zero3_consolidated_16bit_state_dict()
        else:
            state = self.model.state_dict()
        return {k: v.detach().to("cpu", copy=True) for k, v in state.items()} if self.rank == 0 else {}

    def inference_state_dict(self) -> dict[str, Tensor]:
        return self.full_state_dict()

    def save(self, directory: Path, tokenizer: Any = None) -> None:
        """DeepSpeed's checkpoint under `directory/deepspeed` (every rank its partitions) and the full
        weights as a Hugging Face folder in `directory` (rank 0). Collective."""
        self.engine.save_checkpoint(str(directory / CHECKPOINT_SUBDIR), tag=CHECKPOINT_TAG, save_latest=False)
        state = self.full_state_dict()
        if self.rank != 0:
            return
        self.model.save_pretrained(directory, state_dict=state)
        if tokenizer is not None:
            tokenizer.save_pretrained(directory)

    def load(self, directory: Path) -> None:
        folder = directory / CHECKPOINT_SUBDIR
        if not (folder / CHECKPOINT_TAG).is_dir():
            raise FileNotFoundError(
                f"{folder / CHECKPOINT_TAG} is missing: {directory} was not saved by deepspeed_train; resume it with the "
                "strategy that saved it, or start from its weights with model_args.model_name_or_path"
            )
        path, _ = self.engine.load_checkpoint(
            str(folder), tag=CHECKPOINT_TAG, load_optimizer_states=True, load_lr_scheduler_states=True
        )
        if path is None:
            raise ValueError(f"DeepSpeed could not load the checkpoint in {folder} (saved with another rank count or ZeRO stage?)")
        apply_configured_learning_rate(self.torch_optimizer, self.scheduler, self.training_args.learning_rate)
