"""Choosing a training strategy by its config name, and refusing the ones this machine cannot run.

`check_strategy_available(name)` is for the config validator: it raises ValueError at load time, with
the reason and the alternative, so a run never starts with a strategy that would fail in a worker.
"""

from __future__ import annotations

from typing import Any

from roll.strategies.hf_train import HFTrainStrategy

TRAIN_STRATEGY_NAMES = ("hf_train", "fsdp2_train", "deepspeed_train", "megatron_train")


def check_strategy_available(name: str) -> None:
    """None when training strategy `name` can run here; otherwise ValueError saying why and what to use."""
    if name in ("hf_train", "fsdp2_train"):
        return
    if name == "deepspeed_train":
        from roll.strategies.deepspeed_train import deepspeed_missing_reason

        reason = deepspeed_missing_reason()
        if reason:
            raise ValueError(reason)
        return
    if name == "megatron_train":
        raise ValueError(
            "strategy 'megatron_train' is not supported by roll; use fsdp2_train (PyTorch FSDP2: shards "
            "parameters, gradients and optimizer state across workers) or hf_train for one process"
        )
    raise ValueError(f"unknown training strategy {name!r}; choose one of {TRAIN_STRATEGY_NAMES[:3]}")


def create_train_strategy(name: str, *args: Any, strategy_config: dict | None = None, **kwargs: Any) -> HFTrainStrategy:
    """The strategy object for `name`; arguments as HFTrainStrategy's."""
    check_strategy_available(name)
    if name == "hf_train":
        return HFTrainStrategy(*args, **kwargs)
    if name == "fsdp2_train":
        from roll.strategies.fsdp2_train import FSDP2TrainStrategy

        return FSDP2TrainStrategy(*args, **kwargs)
    from roll.strategies.deepspeed_train import DeepSpeedTrainStrategy

    return DeepSpeedTrainStrategy(*args, strategy_config=strategy_config, **kwargs)
