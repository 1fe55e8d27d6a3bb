"""AgenticPipeline: the training loop. `run()` reads top to bottom like the step list in docs/pipeline.md ("One step").

The driver holds the algorithm; workers (Ray actors in Clusters) only compute: generate, score
log-probs and values, train on a batch, save and load.
"""

from __future__ import annotations

import json
import logging
import random
import time
from contextlib import contextmanager
from dataclasses import asdict

from transformers import set_seed

from roll.configs.agentic_config import AgenticConfig
from roll.data.batch import Batch
from roll.pipeline.agentic import checkpoints
from roll.pipeline.agentic.advantage_step import compute_advantage_step
from roll.pipeline.agentic.alarms import CollapseWatch, turn_token_caps
from roll.pipeline.agentic.async_rollout import AsyncRollout
from roll.pipeline.agentic.batch_adjust import adjusted_indices, take_rows, train_multiple
from roll.pipeline.agentic.builders import (
    build_clusters,
    build_kl_controller,
    build_rollout,
    loss_config,
    summary_table,
    val_metrics,
)
from roll.pipeline.agentic.correction_step import apply_train_infer_correction
from roll.pipeline.agentic.group_filter import (
    STATE_CREDIT_ESTIMATORS,
    copy_back_rewards,
    drop_zero_gradient_groups,
    zero_gradient_blockers,
)
from roll.pipeline.agentic.rollout_dump import recorded_rollout
from roll.pipeline.agentic.sft_warmup import run_sft_warmup
from roll.pipeline.agentic.sync_check import SyncVerifier
from roll.pipeline.agentic.warm_start import RUN_CONFIG_FILE, check_same_run, run_config, warm_start_checkpoint
from roll.pipeline.agentic.val_baselines import ValidationBaselines
from roll.pipeline.agentic.weight_sync import plan_buckets, stream_weights
from roll.strategies.registry import strategy_facts
from roll.utils.progress import RunProgress
from roll.utils.tracking import Tracker, headline
from roll.viewer import write_run_report
from roll.viewer.records import TrajectoryRecorder
from roll.workers.train_worker import is_single_update

logger = logging.getLogger("roll.pipeline")


class AgenticPipeline:
    def __init__(self, config: AgenticConfig) -> None:
        self.config = config
        set_seed(config.seed)
        self.checkpoint_root = checkpoints.checkpoint_root(config.output_dir, config.checkpoint_config)
        self.resume_from = checkpoints.resolve_resume(config.resume_from_checkpoint, self.checkpoint_root)
        # The warmed-up reference exists nowhere else (a resumed run skips the warm-up), so it is saved.
        self.saved_parts = checkpoints.saved_parts(config.uses_critic, config.uses_reference and config.sft_warmup.steps > 0)
        if self.resume_from is not None:
            checkpoints.require_parts(self.resume_from, self.saved_parts)
            check_same_run(self.resume_from, config)
        # a new run from another run's checkpoint; a resumed run already holds what its warm start loaded
        self.warm_start = warm_start_checkpoint(config) if self.resume_from is None else None
        if self.warm_start is not None:
            checkpoints.require_parts(self.warm_start, ["actor_train"])
        self.step = 0  # steps completed; logs number steps from 1
        self.batches_ahead: dict = {}  # async training: batches a checkpoint saved for the steps after it
        self.auto_resumes = 0  # times the launcher restarted this run after a lost worker (roll/launch/cli.py sets it)
        self.kl_ctrl = build_kl_controller(config)
        self.progress = RunProgress(config.max_steps, config.report.progress_interval_s)
        with self.progress.phase("starting workers"):
            self.actor_train, self.actor_infer, self.reference, self.critic = build_clusters(config)
            self.train_rollout = recorded_rollout(
                config, lambda: self.reporting_progress(build_rollout(config, self.actor_infer, mode="train")))
            self.val_rollout = (self.reporting_progress(build_rollout(config, self.actor_infer, mode="val"))
                                if config.eval_steps > 0 else None)
        self.weight_buckets = self.plan_weight_buckets()
        self.synced_version: int | None = None  # the weights actor_infer holds (streamed syncs)
        self.sync_verifier = (SyncVerifier(self.actor_train, self.actor_infer, config.actor_infer.model_args.dtype)
                              if config.verify_weight_sync else None)
        if config.async_generation_ratio == 0:  # a restarted inference worker gets them streamed again
            self.actor_infer.restore_hook = self.restore_infer_rank
        self.recorder = TrajectoryRecorder(config)
        self.watch = CollapseWatch(config.alarms, turn_token_caps(config))
        self.val_history: list[tuple[int, dict[str, float]]] = []
        self.gradient_blockers = zero_gradient_blockers(config)
        self.filter_step_gamma = config.step_reward_gamma if config.adv_estimator in STATE_CREDIT_ESTIMATORS else None
        if config.drop_zero_gradient_groups and self.gradient_blockers:
            logger.info("drop_zero_gradient_groups has no effect here: equal-score groups still carry gradient "
                        "(%s)", "; ".join(self.gradient_blockers))
        self.blind_baselines = ValidationBaselines(config.custom_envs) if config.report.map_blind_baselines else None
        if self.resume_from is not None:
            self.load_checkpoint(self.resume_from)
        elif self.warm_start is not None:
            self.load_warm_start(self.warm_start)
        if config.async_generation_ratio > 0:
            self.train_rollout = AsyncRollout(
                self.train_rollout, self.push_weights, int(config.async_generation_ratio), config.rollout_batch_size,
                first_step=self.step + 1, last_step=config.max_steps, timeout_s=config.async_wait_timeout_s,
                ready_batches=self.batches_ahead)
        self.tracker = Tracker(config.track_with, config.tracker_kwargs, config.logging_dir, config.exp_name,
                               config=asdict(config), start_step=self.step + 1)

    def reporting_progress(self, rollout):
        """The rollout, with its episode counts feeding the run's progress line."""
        rollout.on_progress = self.progress.episodes_done
        return rollout

    def run(self) -> dict[str, float]:
        config = self.config
        if self.step == 0 and config.sft_warmup.steps > 0:
            with self.progress.phase("sft warm-up"):
                self.sft_warmup()
        self.progress.begin(self.step + 1)
        for step in range(self.step + 1, config.max_steps + 1):
            metrics: dict[str, float] = {}
            validates = self.val_rollout is not None and (step - 1) % config.eval_steps == 0
            with self.timer(metrics, "time/step_total"):
                with self.timer(metrics, "time/step_model_update"):
                    self.sync_weights(version=step)
                if validates:
                    with self.timer(metrics, "time/step_val"):
                        metrics.update(self.validate(step))
                with self.timer(metrics, "time/step_rollout"):
                    batch = self.train_rollout.get_batch(config.rollout_batch_size, step)
                if self.sync_verifier is not None:  # after the batch: async training loaded its weights then
                    metrics.update(self.sync_verifier.take_metrics())
                metrics.update({k: v for k, v in batch.info.items() if isinstance(v, (int, float))})
                kept, kept_metrics = drop_zero_gradient_groups(
                    batch, config.drop_zero_gradient_groups, self.gradient_blockers, self.actor_train.num_workers,
                    self.filter_step_gamma)
                metrics.update(kept_metrics)
                if kept:
                    trained = batch if len(kept) == len(batch) else batch.index(kept)
                    metrics.update(self.train_on(trained, step, metrics))
                    copy_back_rewards(batch, trained, kept)
                self.kl_ctrl.update(metrics.get("critic/kl", 0.0), len(batch))
            metrics.update(self.watch.check(batch, metrics, step))
            tokens = int(batch["attention_mask"].sum())
            metrics["system/tps"] = tokens / max(metrics["time/step_total"], 1e-9)
            metrics["system/samples"] = float(len(batch))
            metrics["system/auto_resumes"] = float(self.auto_resumes)
            self.step = step
            self.tracker.log(metrics, step)
            self.progress.step_done(step, headline(metrics))
            self.recorder.save(batch, step, "train")
            if validates:
                self.write_report()
            if step % config.save_steps == 0 or step == config.max_steps:
                self.save_checkpoint()
        return self.finish()

    # --- the steps ---------------------------------------------------------------------------

    def train_on(self, batch: Batch, step: int, metrics: dict[str, float]) -> dict[str, float]:
        """Scores, advantages and one training update on `batch` (the rollout's groups that carry gradient).
        The advantages are written into `batch`; batch_adjust_mode then picks the rows that train."""
        config = self.config
        out: dict[str, float] = {}
        # batch_adjust_mode: which samples train, fixed now so scoring knows the training batch size
        train_rows = adjusted_indices(len(batch), self.train_multiple(), config.batch_adjust_mode,
                                      random.Random(config.seed + step))
        with self.timer(metrics, "time/step_logprobs"):
            self.score(batch, train_size=len(train_rows))
        out.update(compute_advantage_step(batch, config, self.kl_ctrl.value))
        trained, adjust_metrics = take_rows(batch, train_rows)
        out.update(adjust_metrics)
        out.update(apply_train_infer_correction(trained, config))
        with self.timer(metrics, "time/step_train"):
            out.update(self.train(trained, step))
        return out

    def sync_weights(self, version: int) -> None:
        """Step 1, weight sync: actor_infer generates with actor_train's current weights. In async training they
        are published instead; the rollout thread loads them between its batches (async_rollout.py)."""
        if isinstance(self.train_rollout, AsyncRollout):
            state_dict = self.actor_train.execute_rank0_ref("get_state_dict")  # stays in Ray's object store
            # checksummed now: by the time the rollout thread loads them the trainer has moved on
            expected = self.sync_verifier.trainer_checksums() if self.sync_verifier is not None else None
            self.train_rollout.publish(version, (state_dict, expected))
        else:
            stream_weights(self.actor_train, self.actor_infer, self.weight_buckets, version)
            self.synced_version = version
            if self.sync_verifier is not None:
                self.sync_verifier.verify(self.sync_verifier.trainer_checksums(), version)

    def push_weights(self, published, version: int) -> None:
        """All the weights at once (async training's published snapshots), then checked."""
        state_dict, expected = published
        self.actor_infer.execute_all("update_weights", state_dict, version)
        if expected is not None:
            self.sync_verifier.verify(expected, version)

    def plan_weight_buckets(self) -> list:
        """weight_sync.py: buckets when both strategies can move a part of the weights, else one."""
        infer_strategy = self.config.actor_infer.strategy_args.strategy_name
        sizes = (self.actor_train.execute_rank0("inference_weight_bytes")
                 if strategy_facts(infer_strategy).loads_weights_in_parts else None)
        return plan_buckets(sizes, self.config.model_update_buffer_size_mb << 20)

    def restore_infer_rank(self, rank: int) -> None:
        """Cluster.recover's hook: a restarted inference rank gets the weights the others hold (the
        trainer has not moved since the last sync: in synchronous training it trains only after the
        rollout)."""
        if self.synced_version is not None:
            stream_weights(self.actor_train, self.actor_infer, self.weight_buckets, self.synced_version, rank=rank)
            if self.sync_verifier is not None:
                self.sync_verifier.verify(self.sync_verifier.trainer_checksums(), self.synced_version, rank=rank)

    def validate(self, step: int) -> dict[str, float]:
        """Step 2: a validation rollout on fixed seeds, so its numbers compare across steps."""
        size = self.config.val_batch_size or self.config.val_env_manager.env_count
        if isinstance(self.train_rollout, AsyncRollout):
            batch = self.train_rollout.run_with_latest_weights(lambda: self.val_rollout.get_batch(size, step))
        else:
            batch = self.val_rollout.get_batch(size, step)
        metrics = val_metrics(batch)
        if self.blind_baselines is not None:
            metrics.update(self.blind_baselines.metrics(batch))
        self.val_history.append((step, metrics))
        self.recorder.save(batch, step, "val")
        return metrics

    def score(self, batch: Batch, train_size: int | None = None) -> None:
        """Step 4, scoring: old log-probs (actor_train), reference log-probs (for KL) and critic values.
        `train_size`: the samples the actor will train on, when batch_adjust_mode changes the count."""
        inputs = batch.select(["input_ids", "attention_mask", "position_ids", "response_mask"])
        # RL reads log-probs of response tokens only: the output layer skips the prompt.
        if self.needs_old_logprobs(train_size or len(batch)):
            old = self.actor_train.dispatch_batch("compute_log_probs", inputs, response_only=True)
            batch.tensors["old_logprobs"] = old["logprobs"]
        if self.reference is not None:
            ref = self.reference.dispatch_batch("compute_log_probs", inputs, response_only=True)
            batch.tensors["ref_logprobs"] = ref["logprobs"]
        if self.critic is not None:
            batch.tensors["values"] = self.critic.dispatch_batch("compute_values", inputs)["values"]

    def needs_old_logprobs(self, batch_size: int) -> bool:
        """Old log-probs need their own forward pass only when the policy moves before some sample is
        trained on (several epochs or mini-batches) or when the token-level KL penalty uses them; in a
        single update the actor takes them from its own forward pass. `enable_old_logprobs_recompute`
        asks for the pass anyway (the driver then applies train_infer_correction to the whole batch)."""
        config = self.config
        if config.enable_old_logprobs_recompute:
            return True
        per_rank = -(-batch_size // self.actor_train.num_workers)
        single_update = is_single_update(per_rank, config.ppo_epochs, config.actor_train.training_args.mini_batch_size)
        return not single_update or (config.add_token_level_kl and self.reference is not None)

    def train_multiple(self) -> int:
        """The sample count whose multiples give every trained role full mini-batches (batch_adjust_mode)."""
        roles = [(self.actor_train, self.config.actor_train)]
        if self.critic is not None:
            roles.append((self.critic, self.config.critic))
        return train_multiple([cluster.num_workers * cfg.training_args.mini_batch_size for cluster, cfg in roles])

    def train(self, batch: Batch, step: int) -> dict[str, float]:
        """Step 6, updates: critic update, then the actor once past critic_warmup."""
        metrics: dict[str, float] = {}
        keys = [k for k in ("input_ids", "attention_mask", "position_ids", "response_mask", "old_logprobs",
                            "ref_logprobs", "advantages", "returns", "values", "infer_logprobs", "scores",
                            "train_infer_is_weight") if k in batch.tensors]
        train_batch = batch.select(keys)
        if self.critic is not None:
            metrics.update(_mean_metrics(self.critic.dispatch_batch("train_step", train_batch, loss_cfg=loss_config(self.config, self.config.critic))))
        if step > self.config.critic_warmup:
            metrics.update(_mean_metrics(self.actor_train.dispatch_batch("train_step", train_batch, loss_cfg=loss_config(self.config, self.config.actor_train))))
        return metrics

    def sft_warmup(self) -> None:
        """Optional supervised warm-up (see sft_warmup.py), with a validation before it at step 0 so
        the table shows what the warm-up taught apart from what RL taught (sft_warmup.validate_before)."""
        if self.val_rollout is not None and self.config.sft_warmup.validate_before:
            self.sync_weights(version=0)
            with self.progress.phase("time/step_val"):
                self.tracker.log(self.validate(0), 0)
        run_sft_warmup(self.config, self.actor_train, self.tracker)
        if self.reference is not None:
            self.reference_from_actor()

    def reference_from_actor(self) -> None:
        """The reference becomes the warmed-up policy: a KL term then holds RL near the model it starts
        from, not near the base model the warm-up taught the reply format (which answers nothing valid)."""
        state = self.actor_train.execute_rank0_ref("get_state_dict")  # stays in Ray's object store
        self.reference.execute_all("load_model_weights", state)

    # --- state ---------------------------------------------------------------------------------

    def save_checkpoint(self) -> None:
        staging = checkpoints.staging_dir(self.checkpoint_root, self.step)
        for part in self.saved_parts:  # a cluster attribute each; the reference only when warmed up
            getattr(self, part).execute_all("save_checkpoint", str(staging / part))
        # Rollout seeds derive from the step number, so the step is all the rollout state there is.
        state = {"step": self.step, "kl_coef": self.kl_ctrl.value, "val_history": self.val_history}
        if isinstance(self.train_rollout, AsyncRollout):  # made with weights older than the checkpoint's
            state["async_batches"] = self.train_rollout.batches_ahead(self.step)
        (staging / RUN_CONFIG_FILE).write_text(json.dumps(run_config(self.config), indent=1))  # resume's check
        path = checkpoints.commit(staging, state)
        logger.info("saved checkpoint %s", path)

    def load_checkpoint(self, path) -> None:
        state = checkpoints.load_state(path)
        for part in self.saved_parts:
            getattr(self, part).execute_all("load_checkpoint", str(path / part))
        self.step, self.kl_ctrl.value = state["step"], state["kl_coef"]
        self.val_history = state["val_history"]
        self.batches_ahead = state.get("async_batches", {})
        logger.info("resumed from %s: continuing at step %d", path, self.step + 1)

    def load_warm_start(self, path) -> None:
        """warm_start_from: the trained roles' weights (and with `optimizer: true` their optimizer state
        and schedule position); step, KL coefficient, RNG and validation history stay this run's own. A
        reference (KL term) becomes the loaded policy: the model this run starts from."""
        with_optimizer = self.config.warm_start_from.optimizer
        self.actor_train.execute_all("load_warm_start", str(path / "actor_train"), with_optimizer)
        if self.critic is not None and (path / "critic").is_dir():
            self.critic.execute_all("load_warm_start", str(path / "critic"), with_optimizer)
        elif self.critic is not None:
            logger.info("warm start: %s has no critic/ folder; the critic starts from its model", path)
        if self.reference is not None:
            self.reference_from_actor()
        logger.info("warm start from %s: weights%s loaded; this run starts at step 1", path,
                    " and optimizer state" if with_optimizer else "")

    def finish(self) -> dict[str, float]:
        """A last validation with the final weights, a summary, and everything shut down."""
        final: dict[str, float] = {}
        if self.val_rollout is not None and self.config.max_steps > 0:
            self.sync_weights(version=self.config.max_steps + 1)
            with self.progress.phase("time/step_val"):
                final = self.validate(self.config.max_steps + 1)
            self.tracker.log(final, self.config.max_steps + 1)
        self.write_report()
        logger.info("\n%s", summary_table(self.val_history, self.config, self.checkpoint_root))
        self.shutdown()
        return final

    def write_report(self) -> None:
        """report.html and the learning-curve plots under logging_dir (see roll/viewer)."""
        if self.config.report.write_report and self.tracker.jsonl_path.is_file():
            with self.progress.phase("report"):
                path, _ = write_run_report(self.config.logging_dir, self.config.exp_name)
            logger.info("report: %s", path)

    def shutdown(self) -> None:
        self.progress.close()
        self.tracker.close()
        for rollout in (self.train_rollout, self.val_rollout):
            if rollout is not None:
                rollout.shutdown()
        for cluster in (self.actor_train, self.actor_infer, self.reference, self.critic):
            if cluster is not None:
                cluster.shutdown()

    @contextmanager
    def timer(self, metrics: dict[str, float], key: str):
        start = time.perf_counter()
        with self.progress.phase(key):
            yield
        metrics[key] = time.perf_counter() - start


def _mean_metrics(per_rank: list[dict[str, float]] | dict[str, float]) -> dict[str, float]:
    if isinstance(per_rank, dict):
        return per_rank
    keys = {k for m in per_rank for k in m}
    return {k: sum(m[k] for m in per_rank if k in m) / sum(1 for m in per_rank if k in m) for k in keys}

