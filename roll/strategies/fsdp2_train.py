"""`fsdp2_train`: the hf_train model sharded across the cluster's ranks with PyTorch FSDP2.

Each decoder layer (the model's `_no_split_modules`) and then the whole model is wrapped with
`fully_shard`: parameters, gradients and AdamW state are split over ranks, gathered layer by layer in
forward/backward. gloo on CPU, NCCL on GPU; ranks meet at the address the Cluster hands out.
Full state dicts (weight sync, checkpoints) are gathered to rank 0 with torch.distributed.checkpoint's
state-dict API, so a checkpoint is an ordinary Hugging Face folder, independent of the rank count.
"""

from __future__ import annotations

import contextlib
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import Tensor
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

from roll.data.micro_batch import MicroBatch
from roll.strategies.hf_train import HFTrainStrategy
from roll.utils.rendezvous import free_address

FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)
FROM_RANK0 = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True, strict=False)


def join_process_group(device: torch.device, rank: int, world_size: int, dist_addr: tuple[str, int] | None, strategy: str) -> None:
    """Joins (or reuses) the default process group: gloo on CPU, NCCL on GPU, at `dist_addr`."""
    if dist.is_initialized():
        return
    if dist_addr is None:
        if world_size > 1:
            raise ValueError(f"{strategy} with several ranks needs a rendezvous address; build it through roll.distributed.Cluster")

        dist_addr = free_address()
    backend = "nccl" if device.type == "cuda" else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(device)
    host, port = dist_addr
    dist.init_process_group(
        backend, init_method=f"tcp://{host}:{port}", rank=rank, world_size=world_size, timeout=timedelta(minutes=30),
    )


def all_reduce_values(values: list[float], op: str, device: torch.device) -> list[float]:
    """Sums (op="sum") or maxima (op="max") of a few floats over all ranks, in float64."""
    tensor = torch.tensor(values, dtype=torch.float64, device=device if device.type == "cuda" else "cpu")
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM if op == "sum" else dist.ReduceOp.MAX)
    return tensor.tolist()


class FSDP2TrainStrategy(HFTrainStrategy):
    name = "fsdp2_train"
    fused_optimizer = False

    def setup_distributed(self, dist_addr: tuple[str, int] | None) -> None:
        if self.model_args.lora_rank:
            raise ValueError("LoRA (model_args.lora_rank) is supported with hf_train only for now; use strategy_name: hf_train")
        join_process_group(self.device, self.rank, self.world_size, dist_addr, self.name)

    def wrap_model(self) -> None:
        self.model.to(self.device)
        policy = MixedPrecisionPolicy(
            param_dtype=None if self.compute_dtype == torch.float32 else self.compute_dtype, reduce_dtype=torch.float32
        )
        layer_names = set(getattr(self.model, "_no_split_modules", None) or [])
        for module in list(self.model.modules()):
            if type(module).__name__ in layer_names:
                fully_shard(module, mp_policy=policy)
        fully_shard(self.model, mp_policy=policy)

    def forward_hidden(self, mb: MicroBatch) -> None:
        # lm_head's weight is a sharded DTensor, gathered only inside the root module's forward hooks,
        # so the output layer cannot run outside the model's forward here: full logits instead.
        return None

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()

    def autocast(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()  # FSDP2's MixedPrecisionPolicy casts the parameters instead

    def all_reduce(self, values: list[float], op: str = "sum") -> list[float]:
        return all_reduce_values(values, op, self.device)

    def loss_scale(self) -> float:
        # FSDP averages gradients over ranks; losses already divide by whole-mini-batch counts, so
        # the sum over ranks is the mini-batch gradient: undo the average.
        return float(self.world_size)

    def full_state_dict(self, names: list[str] | None = None) -> dict[str, Tensor]:
        """Gathered from every rank (collective), so a part costs the whole gather: `names` only filters."""
        state = get_model_state_dict(self.model, options=FULL)
        return state if names is None else {k: state[k] for k in names}

    def inference_weight_bytes(self) -> None:
        # Gathering is collective over the whole model, so a streamed sync would gather it once per
        # bucket: the weights go in one piece.
        return None

    def load_full_state_dict(self, state: dict[str, Tensor]) -> None:
        set_model_state_dict(self.model, state if self.rank == 0 else {}, options=FROM_RANK0)

    def optimizer_state(self) -> dict:
        return get_optimizer_state_dict(self.model, self.optimizer, options=FULL)

    def load_optimizer_state(self, state: dict) -> None:
        set_optimizer_state_dict(self.model, self.optimizer, state if self.rank == 0 else {}, options=FROM_RANK0)
