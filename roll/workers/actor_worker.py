"""ActorWorker: the actor_train role (PPO updates) and the reference role (log-probs only).

`compute_log_probs` scores a batch; `train_step` runs the policy loss `pg_variant` (roll/algorithms/pg_variants.py,
PPO by default) over it, with the train-inference correction (train_infer.py). Both
plan micro-batches the same way (plain padding, dynamic batching or sequence packing, from the
worker config), so their log-probs agree to float precision whatever the layout.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from roll.algorithms import (
    PGInputs,
    PGVariantArgs,
    TrainInferCorrectionConfig,
    agg_loss,
    entropy_for_input_ids,
    entropy_loss,
    kl_loss,
    logprobs_for_input_ids,
    masked_mean,
    pg_loss_matrix,
    train_infer_correction,
)
from roll.data.batch import Batch
from roll.data.micro_batch import MicroBatch
from roll.workers.sft import end_sft, sft_step
from roll.workers.train_worker import LossConfig, TrainWorker, is_single_update

TRAIN_KEYS = ("input_ids", "attention_mask", "response_mask", "advantages")


class ActorWorker(TrainWorker):
    kind = "causal_lm"
    prefix = "actor"

    def token_outputs(self, mb: MicroBatch, with_entropy: bool, entropy_grad: bool = False,
                      token_mask: Tensor | None = None) -> dict[str, Tensor]:
        """Per-sample log-probs (+ entropies) `[num_samples, out_width]`. `token_mask` (the same shape):
        only those tokens are wanted; the others come back 0, and where the strategy runs the output
        layer chunk by chunk (forward_token_logprobs) it runs on the wanted tokens alone."""
        label_mask = None if token_mask is None else mb.to_rows(token_mask)
        # optional in a strategy (a user's own may lack it): without it, full logits below
        chunked_forward = getattr(self.strategy, "forward_token_logprobs", None)
        chunked = chunked_forward(mb, with_entropy, label_mask) if chunked_forward else None
        if chunked is not None:
            # the output layer ran chunk by chunk inside the log-prob function: no [rows, width, vocab] logits
            logprobs, entropy = chunked
            out = {"logprobs": mb.unpack(logprobs)}
            if with_entropy:
                out["entropy"] = mb.unpack(entropy if entropy_grad else entropy.detach())
            return out
        logits = self.strategy.forward(mb)
        input_ids = mb.input_ids.to(logits.device)
        out = {"logprobs": mb.unpack(logprobs_for_input_ids(logits, input_ids))}
        if with_entropy:
            # Without an entropy loss the entropy is only a metric: no graph, no second pass over the
            # logits in backward.
            with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
                out["entropy"] = mb.unpack(entropy_for_input_ids(logits))
        if token_mask is not None:
            keep = token_mask.to(logits.device) != 0
            out = {k: torch.where(keep, v, torch.zeros((), dtype=v.dtype, device=v.device)) for k, v in out.items()}
        return out

    def compute_log_probs(self, batch: Batch, with_entropy: bool = False, response_only: bool = False) -> Batch:
        """Batch({"logprobs": [B, L]} (+ "entropy")), token-aligned: logprobs[b, t] = log p(x_t | x_<t), 0 at t = 0.
        `response_only`: only the tokens of the batch's `response_mask` (the rest 0), which is all RL
        reads; the output layer then skips the prompt (see head_logprobs_for_input_ids)."""
        if response_only and "response_mask" not in batch.tensors:
            raise ValueError("compute_log_probs(response_only=True) needs the batch's response_mask")

        def outputs(mb: MicroBatch) -> dict[str, Tensor]:
            token_mask = mb.gather(batch.tensors["response_mask"]) if response_only else None
            return self.token_outputs(mb, with_entropy, token_mask=token_mask)

        return self.run_forward(batch, outputs)

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

    def end_sft_warmup(self) -> None:
        """Frees the warm-up optimizer's state, which RL never uses (see roll/workers/sft.py)."""
        end_sft(self)

    def micro_batch_loss(
        self, mb: MicroBatch, batch: Batch, cfg: LossConfig, num_tokens: float, num_seqs: float
    ) -> tuple[Tensor, dict[str, float], dict[str, float]]:
        response_mask = mb.gather(batch.tensors["response_mask"])
        out = self.token_outputs(mb, with_entropy=True, entropy_grad=bool(cfg.entropy_loss_coef or cfg.entropy_floor),
                                 token_mask=response_mask)
        logprobs, entropy = out["logprobs"], out["entropy"]
        device = logprobs.device

        def take(key: str) -> Tensor:
            return mb.gather(batch.tensors[key]).to(device)

        mask = response_mask.to(device)
        # In a single update the weights have not moved since the rollout, so the old policy's
        # log-probs are these very log-probs: the pipeline skips a whole forward pass for them.
        old_logprobs = take("old_logprobs") if "old_logprobs" in batch.tensors else logprobs.detach()
        agg = dict(loss_agg_mode=cfg.loss_agg_mode, num_tokens=num_tokens, num_seqs=num_seqs, norm_length=cfg.norm_length)
        is_weight, mask, correction_rates = self._train_infer_correction(batch, cfg, old_logprobs, mask, take)
        scores = take("scores") if "scores" in batch.tensors else None
        pg_mask = self._tokens_at_least(cfg.pg_min_token_entropy, entropy, mask)
        inputs = PGInputs(logprobs, old_logprobs, take("advantages"), pg_mask, scores)
        loss_mat, pg_metrics = pg_loss_matrix(cfg.pg_variant, inputs, self._pg_args(cfg))
        pg_loss = agg_loss(loss_mat * is_weight, pg_mask, cfg.loss_agg_mode, num_tokens, num_seqs, cfg.norm_length)
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
        floor_coef = self._entropy_floor_coef(cfg, entropy, mask)
        floor_mask = self._tokens_at_least(cfg.entropy_floor_min_token_entropy, entropy, mask)
        if floor_coef:
            # over every token the bonus is the entropy term already computed above
            floor_ent = ent if floor_mask is mask else entropy_loss(entropy, floor_mask, **agg)
            loss = loss - floor_coef * floor_ent
        shares["actor/entropy_loss"] = float(ent.detach())
        shares["actor/total_loss"] = float(loss.detach())
        with torch.no_grad():
            log_ratio = logprobs.detach() - old_logprobs
        rates = {
            "actor/clipfrac": pg_metrics.get("clipfrac", 0.0),
            "actor/approxkl": float(masked_mean(0.5 * log_ratio.square(), mask)),
            "actor/policykl": float(masked_mean(log_ratio, mask)),
            **{f"actor/{k}": v for k, v in pg_metrics.items() if k != "clipfrac"},
            **correction_rates,
            "actor/entropy": float(self._mean_token_entropy(entropy, mask)),
        }
        if cfg.entropy_floor:
            rates["actor/entropy_floor_coef"] = floor_coef
        if cfg.pg_min_token_entropy:
            rates["actor/pg_token_share"] = self._share(pg_mask, mask)
        if cfg.entropy_floor_min_token_entropy:
            rates["actor/entropy_floor_token_share"] = self._share(floor_mask, mask)
        if not cfg.use_kl_loss:
            shares["actor/kl_loss"] = 0.0
        return loss, shares, rates

    @staticmethod
    def _tokens_at_least(min_entropy: float, entropy: Tensor, mask: Tensor) -> Tensor:
        """The response tokens where the policy still has a choice (entropy at or above min_entropy,
        detached; 0: every token): the loss mask of the policy-gradient term (pg_min_token_entropy) and of
        the entropy floor's bonus (entropy_floor_min_token_entropy)."""
        if not min_entropy:
            return mask
        return mask * (entropy.detach() >= min_entropy).to(mask.dtype)

    @staticmethod
    def _share(subset: Tensor, mask: Tensor) -> float:
        return float((subset != 0).sum() / max(float((mask != 0).sum()), 1.0))

    @staticmethod
    def _mean_token_entropy(entropy: Tensor, mask: Tensor) -> Tensor:
        return (entropy.detach() * (mask != 0)).sum() / max(float((mask != 0).sum()), 1.0)

    @classmethod
    def _entropy_floor_coef(cls, cfg: LossConfig, entropy: Tensor, mask: Tensor) -> float:
        """The entropy bonus's weight for this micro-batch: entropy_floor_coef × how far its mean token
        entropy is below entropy_floor, 0 above it. A proportional controller: a fixed bonus either does
        nothing to a sharp policy or keeps pushing a broad one, while this one only pushes back as far as the
        policy has fallen. Measured per micro-batch so that gradient accumulation sums independent terms."""
        if not cfg.entropy_floor:
            return 0.0
        shortfall = cfg.entropy_floor - float(cls._mean_token_entropy(entropy, mask))
        return cfg.entropy_floor_coef * max(shortfall, 0.0)

    @staticmethod
    def _pg_args(cfg: LossConfig) -> PGVariantArgs:
        dual = (1.0 + 2.0 * cfg.pg_clip_high) if cfg.dual_clip is True else (cfg.dual_clip or None)
        args = cfg.pg_variant_args or PGVariantArgs()
        return PGVariantArgs(**{**args.__dict__, "pg_clip_low": cfg.pg_clip_low, "pg_clip_high": cfg.pg_clip_high,
                                "dual_clip": dual})

    @staticmethod
    def _train_infer_correction(batch: Batch, cfg: LossConfig, old_logprobs: Tensor, mask: Tensor,
                                take: Callable[[str], Tensor]) -> tuple[Tensor, Tensor, dict[str, float]]:
        """(IS weight, loss mask, metrics). The driver's weight (and the mask it filtered) when it computed
        them (enable_old_logprobs_recompute); otherwise, as ROLL's worker does, the correction of this
        micro-batch's old log-probs against the generation log-probs, whose statistics are reported even
        when no weight or filter is enabled; without generation log-probs, weight 1 and the mask as it is."""
        if "train_infer_is_weight" in batch.tensors:
            return take("train_infer_is_weight"), mask, {}
        if "infer_logprobs" not in batch.tensors:
            return torch.ones_like(old_logprobs), mask, {}
        correction = cfg.train_infer_correction or TrainInferCorrectionConfig()
        is_weight, keep, metrics = train_infer_correction(correction, old_logprobs, take("infer_logprobs"), mask)
        return is_weight, mask * keep.to(mask.dtype), {f"actor/{k}": v for k, v in metrics.items()}
