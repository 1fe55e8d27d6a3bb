"""Builders and small helpers of AgenticPipeline: config in, plain objects out (torchtune style)."""

from __future__ import annotations

import copy
import io
import math
from pathlib import Path
from typing import TYPE_CHECKING

from roll.algorithms import AdaptiveKLController, FixedKLController, PGVariantArgs
from roll.algorithms.pg_variants import WORKER_KEYS as PG_VARIANT_WORKER_KEYS
from roll.configs.worker_config import WorkerConfig
from roll.data.batch import Batch
from roll.distributed.cluster import Cluster
from roll.pipeline.agentic.batch_adjust import max_samples_per_batch
from roll.pipeline.agentic.rollout_scheduler import RolloutScheduler
from roll.strategies.engine_budget import budget_for_run
from roll.strategies.registry import scoring_strategy
from roll.workers.actor_worker import ActorWorker
from roll.workers.critic_worker import CriticWorker
from roll.workers.infer_worker import InferWorker
from roll.workers.train_worker import LossConfig

if TYPE_CHECKING:
    from roll.configs.agentic_config import AgenticConfig


def build_kl_controller(config: "AgenticConfig"):
    if config.target_kl is not None:
        return AdaptiveKLController(config.init_kl_coef, config.target_kl, config.kl_horizon)
    return FixedKLController(config.init_kl_coef)


def optimizer_steps(config: "AgenticConfig", worker: WorkerConfig) -> int:
    """Optimizer steps the whole run takes on one rank: the lr schedule's length."""
    per_rank = math.ceil(max_samples_per_batch(config) / worker.num_workers)
    return max(1, config.max_steps * config.ppo_epochs * math.ceil(per_rank / worker.training_args.mini_batch_size))


def forward_only(worker: WorkerConfig) -> WorkerConfig:
    """The reference only scores log-probs: it runs the training worker's forward pass, never its optimizer."""
    worker = copy.deepcopy(worker)
    worker.strategy_args.strategy_name = scoring_strategy(worker.strategy_args.strategy_name)
    return worker


def engine_defaults(config: "AgenticConfig") -> dict[str, int]:
    """The decode engine's budget derived from the run (KV slots = envs per worker, slot length =
    sequence_length); hf_infer's strategy_config keys override it (roll/strategies/engine_budget.py)."""
    budget = budget_for_run(config)
    return {"max_sessions": budget.max_num_seqs, "max_model_len": budget.max_model_len}


def build_clusters(config: "AgenticConfig"):
    """actor_train, actor_infer, reference (or None), critic (or None), each a Cluster of Ray workers."""
    actor_train = Cluster("actor_train", ActorWorker, config.actor_train, seed=config.seed,
                          num_training_steps=optimizer_steps(config, config.actor_train))
    # Env managers call the infer workers' `generate` concurrently and its decode engine batches the
    # calls. A rank that dies is restarted by Ray and gets the current weights back (Cluster.recover)
    # before it serves again.
    actor_infer = Cluster("actor_infer", InferWorker, config.actor_infer, seed=config.seed,
                          max_restarts=config.max_infer_worker_restarts,
                          ray_options={"max_concurrency": infer_concurrency(config)}, **engine_defaults(config))
    reference = None
    if config.uses_reference:
        reference = Cluster("reference", ActorWorker, forward_only(config.reference), seed=config.seed)
    critic = None
    if config.uses_critic:
        critic = Cluster("critic", CriticWorker, config.critic, seed=config.seed,
                         num_training_steps=optimizer_steps(config, config.critic))
    return actor_train, actor_infer, reference, critic


def infer_concurrency(config: "AgenticConfig") -> int:
    """Ray threads of each inference worker: one per env manager that may wait on `generate` at once
    (training and validation rollouts can overlap), plus a few for releases and the driver's calls.
    Not more: Ray hands each call to the next thread of the actor's pool, so in time every thread has
    its stack resident (measured with InferWorker's default of 1024: +70 MB over the first 60 steps,
    flat with 64; benchmarks/soak.py)."""
    return config.train_env_manager.env_count + config.val_env_manager.env_count + 8


def build_rollout(config: "AgenticConfig", actor_infer: Cluster, mode: str):

    manager = config.train_env_manager if mode == "train" else config.val_env_manager
    return RolloutScheduler(manager, config.custom_envs, config.sequence_length, config.seed,
                            tokenizer_path=config.actor_infer.model_args.model_name_or_path,
                            infer=actor_infer, mode=mode, generating_args=config.actor_infer.generating_args)


def loss_config(config: "AgenticConfig", worker: WorkerConfig) -> LossConfig:
    args = worker.training_args
    return LossConfig(
        ppo_epochs=config.ppo_epochs,
        mini_batch_size=args.mini_batch_size,
        pg_clip_low=config.pg_clip_low if config.pg_clip_low is not None else config.pg_clip,
        pg_clip_high=config.pg_clip_high if config.pg_clip_high is not None else config.pg_clip,
        dual_clip=True if config.dual_clip_loss else None,
        use_kl_loss=config.use_kl_loss,
        kl_loss_coef=config.kl_loss_coef,
        entropy_loss_coef=config.entropy_loss_coef,
        entropy_floor=config.entropy_floor,
        entropy_floor_coef=config.entropy_floor_coef,
        entropy_floor_min_token_entropy=config.entropy_floor_min_token_entropy,
        pg_min_token_entropy=config.pg_min_token_entropy,
        loss_agg_mode=config.loss_agg_mode,
        norm_length=config.sequence_length,
        max_grad_norm=config.max_grad_norm,
        value_clip=config.value_clip,
        pg_variant=worker.pg_variant,
        pg_variant_args=PGVariantArgs(**{name: getattr(worker, name) for name in PG_VARIANT_WORKER_KEYS}),
        train_infer_correction=config.train_infer_correction,
    )


def val_metrics(batch: Batch) -> dict[str, float]:
    """Validation metrics under `val/` (val/env/<tag>/success, …), plus the mean score."""
    metrics = {(k if k.startswith("val/") else f"val/{k}"): float(v) for k, v in batch.info.items()
               if isinstance(v, (int, float)) and k.startswith(("env/", "val/env/"))}
    metrics["val/score/mean"] = float(batch["scores"].float().mean())
    return metrics


def map_blind_verdicts(val: dict[str, float]) -> list[str]:
    """One line per env tag whose maps have map-blind baselines: did the agent beat every policy that
    never looks at the map, on the same maps, and by how many maps."""
    lines = []
    for key in sorted(k for k in val if k.startswith("val/blind/") and k.endswith("/maps")):
        tag = key.split("/")[2]
        maps, agent, blind = int(val[key]), val.get(f"val/env/{tag}/success"), val.get(f"val/blind/{tag}/best")
        if agent is None or blind is None:
            continue
        margin = (agent - blind) * maps
        verdict = (f"beats the best policy that never looks at the map by {margin:.1f} maps" if margin > 1
                   else "does not beat the best policy that never looks at the map by more than one map")
        lines.append(f"{tag}: the agent solved {agent:.3f} of {maps} validation maps, the best map-blind policy "
                     f"{blind:.3f} on the same maps: it {verdict}")
    return lines


def summary_table(val_history: list[tuple[int, dict[str, float]]], config: "AgenticConfig", checkpoint_root: Path) -> str:
    """The end-of-run summary: validation success and validity per tag, first vs last, and where things are."""
    from rich.console import Console
    from rich.table import Table

    lines = [f"run {config.exp_name!r} finished after {config.max_steps} steps"]
    if val_history:
        (first_step, first), (last_step, last) = val_history[0], val_history[-1]
        table = Table(box=None)
        table.add_column("validation metric")
        table.add_column(f"before (step {first_step})", justify="right")
        table.add_column(f"after (step {last_step})", justify="right")
        shown = [k for k in last if k.endswith(("/success", "/action_is_valid")) or k.startswith("val/blind/")]
        for key in sorted(shown):
            table.add_row(key, f"{first.get(key, float('nan')):.3f}", f"{last[key]:.3f}")
        # Plain text (no colour codes): the summary goes to the log file as well as the terminal.
        console = Console(file=io.StringIO(), width=100, color_system=None)
        console.print(table)
        lines.append(console.file.getvalue().rstrip())
        lines.extend(map_blind_verdicts(last))
    lines.append(f"metrics:     {Path(config.logging_dir) / 'metrics.jsonl'}")
    lines.append(f"trajectories: {Path(config.logging_dir) / 'trajectories'}")
    if config.report.write_report:
        lines.append(f"report:      {Path(config.logging_dir) / 'report.html'}  (rewrite it any time: python -m roll.viewer {config.logging_dir})")
        plots = sorted((Path(config.logging_dir) / "plots").glob("*.png"))
        lines.append(f"plots:       {', '.join(str(p) for p in plots) or 'none (no metrics to draw)'}")
    lines.append(f"checkpoints: {checkpoint_root}")
    return "\n".join(lines)
