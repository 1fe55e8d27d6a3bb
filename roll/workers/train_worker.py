"""What the actor and critic workers share: model + strategy set-up, micro-batch planning, the PPO
mini-batch loop, and checkpoints. Subclasses say how a micro-batch's outputs become a loss.

Workers only compute: the pipeline (the driver) decides what to call and when.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from torch import Tensor
from transformers import AutoTokenizer, set_seed

from roll.algorithms.pg_variants import PGVariantArgs
from roll.algorithms.train_infer import TrainInferCorrectionConfig
from roll.configs.worker_config import WorkerConfig
from roll.data.batch import Batch
from roll.data.dynamic_batching import split_dynamic
from roll.data.micro_batch import MicroBatch, scatter_to_batch, split_padded
from roll.data.sequence_packing import split_packed
from roll.distributed.cluster import collective
from roll.strategies import create_train_strategy, strategy_facts
from roll.utils.checkpoint import load_safetensors_dir, rng_state, set_rng_state
from roll.utils.memory import map_large_blocks
from roll.utils.shared_weights import SharedWeights
from roll.utils.weight_checksum import DTYPES as CHECKSUM_DTYPES, state_checksums


@dataclass
class LossConfig:
    """The loss and update settings of one train_step (the pipeline fills it from the top-level config)."""

    ppo_epochs: int = 1
    mini_batch_size: int | None = None  # sequences per optimizer step on each rank; None: training_args.mini_batch_size
    pg_clip_low: float = 0.2
    pg_clip_high: float = 0.2
    dual_clip: float | bool | None = None  # True: c = 1 + 2 · pg_clip_high
    use_kl_loss: bool = False
    kl_loss_coef: float = 0.0
    kl_loss_type: str = "k3"
    entropy_loss_coef: float = 0.0
    # actor only: a mean token entropy the loss holds the policy above (0: off); see ActorWorker.micro_batch_loss
    entropy_floor: float = 0.0
    entropy_floor_coef: float = 1.0
    entropy_floor_min_token_entropy: float = 0.0  # actor only: tokens below this entropy take no floor bonus
    pg_min_token_entropy: float = 0.0  # actor only: tokens below this entropy take no policy-gradient term
    loss_agg_mode: str = "seq-mean-token-mean"
    norm_length: int | None = None  # seq-mean-token-sum-norm's constant (sequence_length); None: the batch width
    max_grad_norm: float | None = 1.0  # None or ≤ 0: no clipping
    value_clip: float | None = None  # critic only
    shuffle: bool = True
    pg_variant: str = "ppo"  # actor only: a name in roll.algorithms.PG_VARIANTS
    pg_variant_args: PGVariantArgs | None = None  # the variants' constants; None: defaults with pg_clip_low/high and dual_clip
    # actor only: IS weight / filters between infer_logprobs and the old log-probs, applied per micro-batch
    # unless the driver already put `train_infer_is_weight` into the batch
    train_infer_correction: TrainInferCorrectionConfig | None = None


def is_single_update(samples_on_rank: int, ppo_epochs: int, mini_batch_size: int) -> bool:
    """True when a train step makes exactly one optimizer step (one epoch, every sample in one
    mini-batch). The policy then has not moved before any sample is trained on, so the old log-probs
    equal the ones the step's own forward pass computes and need no scoring pass of their own."""
    return ppo_epochs == 1 and samples_on_rank <= mini_batch_size


class TrainWorker:
    """A model trained by one strategy on one data-parallel rank. `kind` is "causal_lm" or "value"."""

    kind = "causal_lm"
    prefix = "actor"

    def __init__(
        self,
        worker_config: WorkerConfig,
        rank: int = 0,
        world_size: int = 1,
        *,
        model_path: str | Path | None = None,
        seed: int = 42,
        num_training_steps: int | None = None,
        dist_addr: tuple[str, int] | None = None,
    ) -> None:
        # Before the model and optimizer exist: a training step's blocks then come from maps that go
        # back to the system when freed, so its peak is what is alive, not a fragmented heap.
        map_large_blocks()
        self.config = worker_config
        self.rank, self.world_size, self.seed = rank, world_size, seed
        path = model_path or worker_config.model_args.model_name_or_path
        if not path:
            raise ValueError(f"{type(self).__name__} needs model_args.model_name_or_path (or model_path)")
        # The same seed on every rank: a freshly initialised head (the critic's) must match across ranks.
        set_seed(seed)
        self.tokenizer = AutoTokenizer.from_pretrained(str(path))
        self.strategy = create_train_strategy(
            worker_config.strategy_args.strategy_name or "hf_train",
            str(path),
            worker_config.model_args,
            worker_config.training_args,
            kind=self.kind,
            rank=rank,
            world_size=world_size,
            num_training_steps=num_training_steps,
            dist_addr=dist_addr,
            strategy_config=worker_config.strategy_args.strategy_config,
        )
        self.train_steps_done = 0
        set_seed(seed + rank)

    # --- micro-batches ----------------------------------------------------------------------------
    def plan_micro_batches(self, batch: Batch, train: bool) -> list[tuple[MicroBatch, float]]:
        """(micro-batch, weight) pairs; weight 0 marks a repeat that only keeps FSDP ranks in step."""
        split = self._splitter(batch, train)
        micro_batches = split(1)
        wanted = int(self.strategy.all_reduce([len(micro_batches)], op="max")[0])
        if wanted > len(micro_batches):
            micro_batches = split(wanted)
        pairs = [(mb, 1.0) for mb in micro_batches]
        # Ranks must run the same number of forward/backward passes (FSDP gathers in each): repeat one.
        pairs += [(micro_batches[0], 0.0)] * (wanted - len(micro_batches))
        return pairs

    def _splitter(self, batch: Batch, train: bool) -> Callable[[int], list[MicroBatch]]:
        cfg = self.config
        width = batch.tensors["input_ids"].shape[1]
        rows = cfg.training_args.per_device_train_batch_size if train else cfg.infer_batch_size
        budget = cfg.max_tokens_per_microbatch_in_train if train else cfg.max_tokens_per_microbatch_in_infer
        if cfg.use_sequence_packing:
            args = cfg.sequence_packing_args or {}
            key = "max_packed_sequence_length_train" if train else "max_packed_sequence_length_forward"
            length = args.get(key) or budget or rows * width
            return lambda n: split_packed(batch, length, n)
        dynamic = cfg.use_dynamic_batching_in_train if train else cfg.use_dynamic_batching_in_infer
        if dynamic:
            rounding = cfg.sequence_length_round_in_train if train else cfg.sequence_length_round_in_infer
            return lambda n: split_dynamic(batch, budget, rounding, n)
        return lambda n: split_padded(batch, rows)

    # --- the PPO update loop ----------------------------------------------------------------------
    def mini_batch_size(self, cfg: LossConfig) -> int:
        return cfg.mini_batch_size or self.config.training_args.mini_batch_size

    def micro_batch_loss(
        self, mb: MicroBatch, batch: Batch, cfg: LossConfig, num_tokens: float, num_seqs: float
    ) -> tuple[Tensor, dict[str, float], dict[str, float]]:
        """(loss share of this micro-batch, metrics that add up over micro-batches, token-mean metrics)."""
        raise NotImplementedError

    def loss_mask_key(self) -> str:
        return "response_mask"

    def run_train_step(self, batch: Batch, cfg: LossConfig) -> dict[str, float]:
        """ppo_epochs passes over shuffled mini-batches; one optimizer step per mini-batch."""
        facts = strategy_facts(self.strategy.name)
        if not facts.multi_rank and self.world_size > 1:
            raise ValueError(f"{facts.name} trains in one process; for several training workers use strategy_name: {facts.alternative}")
        size = self.mini_batch_size(cfg)
        if size < 1 or cfg.ppo_epochs < 1:
            raise ValueError(f"mini_batch_size ({size}) and ppo_epochs ({cfg.ppo_epochs}) must be ≥ 1")
        if cfg.norm_length is None:
            cfg = LossConfig(**{**cfg.__dict__, "norm_length": batch.tensors["input_ids"].shape[1]})
        # The shuffle depends only on (seed, rank, step), so a resumed run draws the same mini-batches.
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.rank * 7919 + self.train_steps_done)
        self.strategy.model.train()
        n_local = len(batch)
        n_mini = int(self.strategy.all_reduce([-(-n_local // size)], op="max")[0])
        step_metrics: list[dict[str, float]] = []
        for _ in range(cfg.ppo_epochs):
            order = torch.randperm(n_local, generator=generator) if cfg.shuffle else torch.arange(n_local)
            for m in range(n_mini):
                index = order[m * size : (m + 1) * size]
                # A rank with fewer samples repeats some with zero weight to stay in step with the others.
                weight = 1.0 if len(index) else 0.0
                mini = batch.index(index if len(index) else order[:1])
                step_metrics.append(self._train_mini_batch(mini, cfg, weight))
        self.train_steps_done += 1
        result = {k: float(np.mean([m[k] for m in step_metrics])) for k in step_metrics[0]}
        result[f"{self.prefix}/lr"] = self.strategy.lr
        return result

    def _train_mini_batch(self, mini: Batch, cfg: LossConfig, weight: float) -> dict[str, float]:
        mask = mini.tensors[self.loss_mask_key()]
        counts = [float((mask != 0).sum()) * weight, float((mask != 0).any(dim=-1).sum()) * weight]
        num_tokens, num_seqs = self.strategy.all_reduce(counts, op="sum")
        sums: dict[str, float] = {}
        weighted: dict[str, float] = {}
        tokens_seen = 0.0
        for mb, mb_weight in self.plan_micro_batches(mini, train=True):
            w = mb_weight * weight
            loss, shares, rates = self.micro_batch_loss(mb, mini, cfg, num_tokens, num_seqs)
            self.strategy.backward(loss * w)
            tokens = float((mb.gather(mask) != 0).sum()) * w
            tokens_seen += tokens
            for k, v in shares.items():
                sums[k] = sums.get(k, 0.0) + v * w
            for k, v in rates.items():
                weighted[k] = weighted.get(k, 0.0) + v * tokens
        grad_norm = self.strategy.optimizer_step(cfg.max_grad_norm)
        # Loss shares add up to the mini-batch loss over micro-batches and ranks; rates are token means.
        sum_keys, rate_keys = sorted(sums), sorted(weighted)
        reduced = self.strategy.all_reduce([sums[k] for k in sum_keys] + [weighted[k] for k in rate_keys] + [tokens_seen])
        metrics = dict(zip(sum_keys, reduced[: len(sum_keys)]))
        metrics.update({k: v / max(reduced[-1], 1.0) for k, v in zip(rate_keys, reduced[len(sum_keys) : -1])})
        metrics[f"{self.prefix}/grad_norm"] = grad_norm
        return metrics

    @torch.no_grad()
    def run_forward(self, batch: Batch, outputs: Callable[[MicroBatch], dict[str, Tensor]]) -> Batch:
        """Per-token outputs of every sample, `[B, L]` in batch order (eval mode, no gradients)."""
        self.strategy.model.eval()
        plan = self.plan_micro_batches(batch, train=False)
        results = [(mb, outputs(mb)) for mb, _ in plan]
        real = [(mb, out) for (mb, out), (_, w) in zip(results, plan) if w > 0]
        width = batch.tensors["input_ids"].shape[1]
        keys = real[0][1].keys()
        return Batch(tensors={
            k: scatter_to_batch([mb for mb, _ in real], [o[k].cpu() for _, o in real], len(batch), width) for k in keys
        })

    # --- state ------------------------------------------------------------------------------------
    @collective
    def get_state_dict(self, names: list[str] | None = None) -> dict[str, Tensor] | None:
        """Full weights named as the plain HF model (LoRA merged), on rank 0; None on other ranks.
        `names`: only these (a bucket of a streamed sync; names from inference_weight_bytes)."""
        state = self.strategy.inference_state_dict() if names is None else self.strategy.inference_state_dict(names)
        return state if self.rank == 0 else None

    def get_weight_bucket(self, names: list[str]) -> SharedWeights:
        """The weights `names` (a bucket of a streamed sync; names from inference_weight_bytes) as views
        of the live ones, which Ray copies once into its store when this method returns. Only where
        inference_weight_bytes is known: every rank holds the plain model, so rank 0 answers alone."""
        return SharedWeights.of(self.strategy.live_weights(names))

    @collective
    def weight_checksums(self, dtype: str) -> dict[str, int] | None:
        """Checksums of the weights get_state_dict returns, cast to the inference engine's `dtype`
        (roll/utils/weight_checksum.py), on rank 0; None on other ranks. A strategy whose ranks hold the
        plain model (the one that streams weights in parts) reads them in place, without a copy."""
        target = CHECKSUM_DTYPES[dtype]
        if self.inference_weight_bytes() is not None:  # hf_train without LoRA: each rank holds the plain model
            return self.strategy.inference_weight_checksums(target) if self.rank == 0 else None
        state = self.strategy.inference_state_dict()  # a sharded strategy gathers the weights on every rank
        return state_checksums(state, target) if self.rank == 0 else None

    @collective
    def load_model_weights(self, state: dict[str, Tensor]) -> None:
        """Replaces every weight with `state` (a get_state_dict of the same model), given to every rank:
        hf_train ranks each hold the whole model, a sharded strategy scatters rank 0's copy. The
        reference takes the warmed-up policy this way."""
        self.strategy.load_full_state_dict(state)

    def inference_weight_bytes(self) -> dict[str, int] | None:
        """Bytes of each weight get_state_dict returns, when the strategy can copy a part of them alone
        (hf_train without LoRA); None when they come in one piece (sharded strategies gather them all)."""
        sizes = getattr(self.strategy, "inference_weight_bytes", None)
        return sizes() if sizes is not None else None

    @collective
    def save_checkpoint(self, directory: str | Path) -> None:
        """HF weights + tokenizer, optimizer and scheduler (rank 0), RNG states and counters (every rank)."""
        directory = Path(directory)
        self.strategy.save(directory, self.tokenizer)
        directory.mkdir(parents=True, exist_ok=True)
        torch.save(
            {"rng": rng_state(), "train_steps_done": self.train_steps_done},
            directory / f"worker_state_rank{self.rank}.pt",
        )

    @collective
    def load_checkpoint(self, directory: str | Path) -> None:
        directory = Path(directory)
        state_file = directory / f"worker_state_rank{self.rank}.pt"
        if not state_file.exists():
            raise FileNotFoundError(f"{state_file} is missing: was this checkpoint saved with {self.world_size} ranks?")
        self.strategy.load(directory)
        state = torch.load(state_file, map_location="cpu", weights_only=False)
        self.train_steps_done = state["train_steps_done"]
        set_rng_state(state["rng"])

    @collective
    def load_warm_start(self, directory: str | Path, with_optimizer: bool) -> None:
        """Another run's weights, at the start of a new run (`warm_start_from`): the checkpoint's Hugging
        Face weights (LoRA: its adapter), and with `with_optimizer` its optimizer state and schedule
        position; never its RNG states or step counters, which belong to the run that saved them."""
        directory = Path(directory)
        if with_optimizer:
            self.strategy.load(directory)
        elif self.config.model_args.lora_rank:
            self.strategy.load_lora(directory)
        else:
            self.strategy.load_full_state_dict(load_safetensors_dir(directory))

    def shutdown(self) -> None:
        self.strategy.close()
