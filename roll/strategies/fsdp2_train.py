"""`fsdp2_train`: the hf_train model sharded across the cluster's ranks with PyTorch FSDP2.

Each decoder layer (the model's `_no_split_modules`) and then the whole model is wrapped with
`fully_shard`: parameters, gradients and AdamW state are split over ranks, gathered layer by layer in
forward/backward. gloo on CPU, NCCL on GPU; ranks meet at the address the Cluster hands out.

- Mixed precision: master weights, gradients and AdamW's moments stay fp32; with `dtype: bf16` (or
  fp16) FSDP2's MixedPrecisionPolicy gathers the weights in that dtype for compute and reduces the
  gradients in fp32.
- The output layer runs chunk by chunk (roll/algorithms/head_logprobs.py) inside the model's forward,
  where FSDP2 has gathered its weight, so `[tokens, vocab]` logits never exist, as with hf_train.
- `strategy_args.strategy_config`: `offload_policy: true` keeps the sharded parameters, gradients and
  optimizer state in CPU memory (FSDP2's CPUOffloadPolicy; AdamW then steps on the CPU) and copies
  each layer to the GPU only for its compute; `reshard_after_forward: false` keeps the gathered weights
  from forward to backward (faster, more memory).
- Full state dicts (weight sync, checkpoints) are gathered to rank 0 with torch.distributed.checkpoint's
  state-dict API, so a checkpoint is an ordinary Hugging Face folder (`model.safetensors`, loadable
  with `from_pretrained`), independent of the rank count.
"""

from __future__ import annotations

import contextlib
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, OffloadPolicy, fully_shard

from roll.algorithms.head_logprobs import head_logprobs_for_input_ids
from roll.configs.worker_config import ModelArgs, TrainingArgs
from roll.data.micro_batch import MicroBatch
from roll.strategies.hf_train import PLAIN_HEAD_MODEL_TYPES, HFTrainStrategy
from roll.utils.rendezvous import free_address

FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)
FROM_RANK0 = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True, strict=False)
CONFIG_KEYS = {"offload_policy": bool, "reshard_after_forward": bool}


def fsdp2_options(strategy_config: dict[str, Any] | None) -> dict[str, bool]:
    """fsdp2_train's `strategy_config`, checked: only CONFIG_KEYS, each a bool."""
    config = dict(strategy_config or {})
    unknown = sorted(set(config) - set(CONFIG_KEYS))
    if unknown:
        raise ValueError(f"strategy_config: {unknown} are not fsdp2_train settings; it takes "
                         f"{sorted(CONFIG_KEYS)} (see docs/training.md, 'fsdp2_train')")
    for key, value in config.items():
        if not isinstance(value, CONFIG_KEYS[key]):
            raise ValueError(f"strategy_config.{key} must be true or false (fsdp2_train), got {value!r}")
    return {"offload_policy": config.get("offload_policy", False),
            "reshard_after_forward": config.get("reshard_after_forward", True)}


class LogProbHead(nn.Module):
    """Stands in for `lm_head` during one forward: turns the final hidden states into token log-probs
    (and entropies) of `input_ids` with the real output layer's weight, chunk by chunk. Running inside
    the model's forward matters under FSDP2: only there is that weight gathered, and only a use there
    has its gradient reduce-scattered. Returns `[rows, width, 1]` (log-probs) or `[rows, width, 2]`
    (log-probs, entropies) in place of the logits."""

    def __init__(self, head: nn.Linear, input_ids: Tensor, with_entropy: bool, dtype: torch.dtype,
                 label_mask: Tensor | None) -> None:
        super().__init__()
        self.head = head
        self.input_ids, self.with_entropy, self.dtype, self.label_mask = input_ids, with_entropy, dtype, label_mask

    def forward(self, hidden: Tensor) -> Tensor:
        logprobs, entropy = head_logprobs_for_input_ids(hidden, self.head, self.input_ids, self.with_entropy,
                                                        dtype=self.dtype, label_mask=self.label_mask)
        return torch.stack((logprobs, entropy), dim=-1) if self.with_entropy else logprobs.unsqueeze(-1)


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

    def __init__(self, model_path: str, model_args: ModelArgs, training_args: TrainingArgs, *,
                 strategy_config: dict[str, Any] | None = None, **options: Any) -> None:
        self.options = fsdp2_options(strategy_config)
        super().__init__(model_path, model_args, training_args, **options)

    def setup_distributed(self, dist_addr: tuple[str, int] | None) -> None:
        if self.model_args.lora_rank:
            raise ValueError("LoRA (model_args.lora_rank) is supported with hf_train only for now; use strategy_name: hf_train")
        join_process_group(self.device, self.rank, self.world_size, dist_addr, self.name)

    def wrap_model(self) -> None:
        offload = self.options["offload_policy"]
        if not offload:  # with the offload policy the sharded parameters stay in CPU memory
            self.model.to(self.device)
        policy = MixedPrecisionPolicy(
            param_dtype=None if self.compute_dtype == torch.float32 else self.compute_dtype, reduce_dtype=torch.float32
        )
        shard = {"mp_policy": policy, "reshard_after_forward": self.options["reshard_after_forward"],
                 "offload_policy": CPUOffloadPolicy(pin_memory=self.device.type == "cuda") if offload else OffloadPolicy()}
        layer_names = set(getattr(self.model, "_no_split_modules", None) or [])
        for module in list(self.model.modules()):
            if type(module).__name__ in layer_names:
                fully_shard(module, **shard)
        fully_shard(self.model, **shard)

    def forward_hidden(self, mb: MicroBatch) -> None:
        # lm_head's weight is gathered only inside the root module's forward (FSDP2's hooks), so the
        # output layer cannot run after it: forward_token_logprobs runs it inside instead.
        return None

    def forward_token_logprobs(self, mb: MicroBatch, with_entropy: bool,
                               label_mask: Tensor | None = None) -> tuple[Tensor, Tensor | None] | None:
        """As HFTrainStrategy's: the output layer swapped, for this forward, for a LogProbHead that runs
        it chunk by chunk on the gathered weight. None (full logits) for value models, an output layer
        that is not a plain Linear, or an architecture that transforms its logits after lm_head."""
        head = self.model.get_output_embeddings() if self.kind == "causal_lm" else None
        if type(head) is not nn.Linear or self.model.config.model_type not in PLAIN_HEAD_MODEL_TYPES:
            return None
        inputs = self._model_inputs(mb)
        mask = None if label_mask is None else label_mask.to(self.device)
        self.model.set_output_embeddings(LogProbHead(head, inputs["input_ids"], with_entropy, self.compute_dtype, mask))
        try:
            out = self.model(**inputs).logits
        finally:
            self.model.set_output_embeddings(head)
        return out[..., 0], (out[..., 1] if with_entropy else None)

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
        """Gathered from every rank (collective), so a part costs the whole gather: `names` only filters.
        Copies, never views of the live weights: with one rank on the CPU the "gathered" tensor is the
        local shard itself, which the next optimizer step would change under the caller."""
        state = get_model_state_dict(self.model, options=FULL)
        if self.world_size == 1 and self.device.type == "cpu":
            state = {k: v.clone() for k, v in state.items()}
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
