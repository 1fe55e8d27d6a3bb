"""CriticWorker: a scalar value head on a transformer backbone, trained with the clipped value loss.

The model is `AutoModelForTokenClassification(num_labels=1)` loaded from the critic's model path
(`reward_pretrain` or `pretrain`): the backbone's weights, a freshly initialised head. Values follow
roll's token alignment: values[b, t] = V(x_<t), the value of the state in which token t was chosen
(the head's output at position t − 1), 0 at t = 0 — the V_t that GAE pairs with reward r_t.
"""

from __future__ import annotations

import torch
from torch import Tensor

from roll.algorithms import value_loss
from roll.data.batch import Batch
from roll.data.micro_batch import MicroBatch
from roll.workers.train_worker import LossConfig, TrainWorker

TRAIN_KEYS = ("input_ids", "attention_mask", "response_mask", "values", "returns")


class CriticWorker(TrainWorker):
    kind = "value"
    prefix = "critic"

    def _values(self, mb: MicroBatch) -> Tensor:
        head = self.strategy.forward(mb)[..., 0]
        aligned = torch.nn.functional.pad(head[:, :-1], (1, 0))
        return mb.unpack(aligned)

    def compute_values(self, batch: Batch) -> Batch:
        """Batch({"values": [B, L]}), token-aligned as the module docstring says."""
        return self.run_forward(batch, lambda mb: {"values": self._values(mb)})

    def train_step(self, batch: Batch, loss_cfg: LossConfig | None = None) -> dict[str, float]:
        """One value update over `batch` (input_ids, attention_mask, response_mask, values = the old
        values, returns). Returns critic/vf_loss, critic/vf_clipfrac, critic/vpred_mean, critic/grad_norm,
        critic/lr."""
        cfg = loss_cfg or LossConfig()
        missing = [k for k in TRAIN_KEYS if k not in batch.tensors]
        if missing:
            raise ValueError(f"CriticWorker.train_step needs batch tensors {missing} (it has {sorted(batch.tensors)})")
        return self.run_train_step(batch, cfg)

    def micro_batch_loss(
        self, mb: MicroBatch, batch: Batch, cfg: LossConfig, num_tokens: float, num_seqs: float
    ) -> tuple[Tensor, dict[str, float], dict[str, float]]:
        values = self._values(mb)
        device = values.device

        def take(key: str) -> Tensor:
            return mb.gather(batch.tensors[key]).to(device)

        loss, metrics = value_loss(
            values, take("values"), take("returns"), take("response_mask"), value_clip=cfg.value_clip,
            loss_agg_mode=cfg.loss_agg_mode, num_tokens=num_tokens, num_seqs=num_seqs, norm_length=cfg.norm_length,
        )
        rates = {"critic/vf_clipfrac": metrics["vf_clipfrac"], "critic/vpred_mean": metrics["vpred_mean"]}
        return loss, {"critic/vf_loss": float(loss.detach())}, rates
