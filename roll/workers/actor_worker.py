"""ActorWorker: the actor_train role (PPO updates) and the reference role (log-probs only).

`compute_log_probs` scores a batch; `train_step` runs the PPO loss of roll.algorithms over it. Both
plan micro-batches the same way (plain padding, dynamic batching or sequence packing, from the
worker config), so their log-probs agree to float precision whatever the layout.
"""

from __future__ import annotations

import torch
from torch import Tensor

from roll.algorithms import entropy_for_input_ids, entropy_loss, kl_loss, logprobs_for_input_ids, ppo_policy_loss
from roll.data.batch import Batch
from roll.data.micro_batch import MicroBatch
from roll.workers.base_worker import LossConfig, TrainWorker, is_single_update
from roll.workers.sft import sft_step

TRAIN_KEYS = ("input_ids", "attention_mask", "response_mask", "advantages")


class ActorWorker(TrainWorker):
    kind = "causal_lm"
    prefix = "actor"

    def _outputs(self, mb: MicroBatch, with_entropy: bool, entropy_grad: bool = False) -> dict[str, Tensor]:
        logits = self.strategy.forward(mb)
        input_ids = mb.input_ids.to(logits.device)
        out = {"logprobs": mb.unpack(logprobs_for_input_ids(logits, input_ids))}
        if with_entropy:
            # Without an entropy loss the entropy is only a metric: no graph, no second pass over the
            # logits in backward.
            with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
                out["entropy"] = mb.unpack(entropy_for_input_ids(logits))
        return out

    def compute_log_probs(self, batch: Batch, with_entropy: bool = False) -> Batch:
        """Batch({"logprobs": [B, L]} (+ "entropy")), token-aligned: logprobs[b, t] = log p(x_t | x_<t), 0 at t = 0."""
        return self.run_forward(batch, lambda mb: self._outputs(mb, with_entropy))

    def train_step(self, batch: Batch, loss_cfg: LossConfig | None = None) -> dict[str, float]:
        """One PPO update over `batch` (input_ids, attention_mask, response_mask, old_logprobs, advantages,
        + ref_logprobs with use_kl_loss). Returns actor/pg_loss, actor/clipfrac, actor/approxkl,
        actor/entropy, actor/kl_loss, actor/grad_norm, actor/lr (means over mini-batches)."""
        cfg = loss_cfg or LossConfig()
        if "old_logprobs" not in batch.tensors and not is_single_update(len(batch), cfg.ppo_epochs, self.mini_batch_size(cfg)):
            raise ValueError("ActorWorker.train_step needs old_logprobs unless it makes a single update "
                             "(ppo_epochs 1 and the whole batch in one mini-batch)")
        needed = TRAIN_KEYS + (("ref_logprobs",) if cfg.use_kl_loss else ())
        missing = [k for k in needed if k not in batch.tensors]
        if missing:
            raise ValueError(f"ActorWorker.train_step needs batch tensors {missing} (it has {sorted(batch.tensors)})")
        return self.run_train_step(batch, cfg)

    def sft_step(self, batch: Batch, learning_rate: float, max_grad_norm: float | None = 1.0) -> dict[str, float]:
        """One supervised step (token-mean NLL of the response tokens) for the SFT warm-up; see roll/workers/sft.py."""
        return sft_step(self, batch, learning_rate, max_grad_norm)

    def micro_batch_loss(
        self, mb: MicroBatch, batch: Batch, cfg: LossConfig, num_tokens: float, num_seqs: float
    ) -> tuple[Tensor, dict[str, float], dict[str, float]]:
        out = self._outputs(mb, with_entropy=True, entropy_grad=bool(cfg.entropy_loss_coef))
        logprobs, entropy = out["logprobs"], out["entropy"]
        device = logprobs.device

        def take(key: str) -> Tensor:
            return mb.gather(batch.tensors[key]).to(device)

        mask = take("response_mask")
        # In a single update the weights have not moved since the rollout, so the old policy's
        # log-probs are these very log-probs: the pipeline skips a whole forward pass for them.
        old_logprobs = take("old_logprobs") if "old_logprobs" in batch.tensors else logprobs.detach()
        agg = dict(loss_agg_mode=cfg.loss_agg_mode, num_tokens=num_tokens, num_seqs=num_seqs, norm_length=cfg.norm_length)
        pg_loss, pg_metrics = ppo_policy_loss(
            logprobs, old_logprobs, take("advantages"), mask,
            clip_low=cfg.pg_clip_low, clip_high=cfg.pg_clip_high, dual_clip=cfg.dual_clip, **agg,
        )
        loss = pg_loss
        shares = {"actor/pg_loss": float(pg_loss.detach())}
        if cfg.use_kl_loss:
            kl = kl_loss(logprobs, take("ref_logprobs"), mask, kind=cfg.kl_loss_type, **agg)
            loss = loss + cfg.kl_loss_coef * kl
            shares["actor/kl_loss"] = float(kl.detach())
        ent = entropy_loss(entropy, mask, **agg)
        if cfg.entropy_loss_coef:
            # Entropy is a bonus: subtracting it rewards a broader distribution.
            loss = loss - cfg.entropy_loss_coef * ent
        shares["actor/entropy_loss"] = float(ent.detach())
        shares["actor/total_loss"] = float(loss.detach())
        rates = {
            "actor/clipfrac": pg_metrics["pg_clipfrac"],
            "actor/approxkl": pg_metrics["approxkl"],
            "actor/policykl": pg_metrics["policykl"],
            "actor/entropy": float((entropy.detach() * (mask != 0)).sum() / max(float((mask != 0).sum()), 1.0)),
        }
        if not cfg.use_kl_loss:
            shares["actor/kl_loss"] = 0.0
        return loss, shares, rates
