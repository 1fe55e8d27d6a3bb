"""`deepspeed_train`: the hf_train model under a DeepSpeed engine (ZeRO), where DeepSpeed is installed.

`strategy_args.strategy_config` is the DeepSpeed config (ZeRO stage, offload…); batch sizes and the
optimizer come from roll (AdamW + the lr scheduler of training_args), so they are not repeated there.
Without DeepSpeed installed the config validator refuses the name (roll.strategies.train) and points
to fsdp2_train, which shards the same way with PyTorch alone.
"""

from __future__ import annotations

import importlib.util
import math
from typing import Any

from torch import Tensor

from roll.strategies.fsdp2_train import FSDP2TrainStrategy


def deepspeed_missing_reason() -> str | None:
    if importlib.util.find_spec("deepspeed") is None:
        return (
            "strategy 'deepspeed_train' needs DeepSpeed, which is not installed here "
            "(pip install deepspeed, on a machine with CUDA); use strategy_name: fsdp2_train, which "
            "shards parameters, gradients and optimizer state across workers with PyTorch FSDP2"
        )
    return None


class DeepSpeedTrainStrategy(FSDP2TrainStrategy):
    """Rendezvous and state-dict gathering as in fsdp2_train; DeepSpeed owns sharding and the step."""

    name = "deepspeed_train"

    def __init__(self, *args: Any, strategy_config: dict | None = None, **kwargs: Any) -> None:
        reason = deepspeed_missing_reason()
        if reason:
            raise ValueError(reason)
        self.ds_config = dict(strategy_config or {})
        super().__init__(*args, **kwargs)

    def wrap_model(self) -> None:
        import deepspeed

        config = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, **self.ds_config}
        config.setdefault("zero_optimization", {"stage": 2})
        if self.model_args.dtype == "bf16":
            config.setdefault("bf16", {"enabled": True})
        self.ds_engine_config = config

        self._deepspeed = deepspeed

    def _late_init(self) -> None:
        # DeepSpeed wants the optimizer and scheduler at initialize(), which HFTrainStrategy builds
        # after wrap_model, so the engine is made on first use.
        if getattr(self, "engine", None) is None:
            self.engine, self.optimizer, _, self.scheduler = self._deepspeed.initialize(
                model=self.model, optimizer=self.optimizer, lr_scheduler=self.scheduler, config=self.ds_engine_config
            )

    def forward(self, mb) -> Tensor:
        self._late_init()
        inputs = {k: (v.to(self.device) if isinstance(v, Tensor) else v) for k, v in mb.model_inputs().items()}
        return self.engine(**inputs).logits.float()

    def loss_scale(self) -> float:
        return float(self.world_size)  # DeepSpeed averages gradients over ranks, like FSDP

    def backward(self, loss: Tensor) -> None:
        self._late_init()
        # Accumulation is roll's (global denominators), so DeepSpeed must not rescale: scale_wrt_gas=False.
        self.engine.backward(loss * self.loss_scale(), scale_wrt_gas=False)

    def optimizer_step(self, max_grad_norm: float | None) -> float:
        self._late_init()
        self.engine.gradient_clipping = lambda: max_grad_norm or 0.0
        self.engine.step()
        norm = self.engine.get_global_grad_norm()
        return float(norm) if norm is not None else math.nan

    def full_state_dict(self) -> dict[str, Tensor]:
        self._late_init()
        return self.engine._zero3_consolidated_16bit_state_dict() if self.engine.zero_optimization_stage() == 3 else {
            k: v.detach().cpu() for k, v in self.engine.module.state_dict().items()
        }

    def save(self, directory, tokenizer=None) -> None:
        raise NotImplementedError("checkpoints with deepspeed_train are not implemented yet; use fsdp2_train")

    def load(self, directory) -> None:
        raise NotImplementedError("checkpoints with deepspeed_train are not implemented yet; use fsdp2_train")
