"""Two ways to start from a checkpoint, with their own names (docs/pipeline.md, "Resume and warm starts").

`resume_from_checkpoint` continues the same run exactly: step numbers, optimizer, schedule, KL
coefficient, RNG. A checkpoint saved under a config that trains differently is refused before any
worker starts, naming the keys (`training_differences`); every checkpoint holds its run's config
(`RUN_CONFIG_FILE`) for that check.

`warm_start_from` starts a new run from another run's checkpoint (WarmStartConfig): the trained
roles' weights, and with `optimizer: true` their optimizer state and schedule position. Given an
earlier stage (`config` + `step`), the launcher runs that config first unless its checkpoint of that
step exists (`earlier_stages`), so a chain of runs is one command.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from roll.configs.errors import ConfigError
from roll.configs.agentic_config import AgenticConfig
from roll.pipeline.agentic.checkpoints import STATE_FILE, checkpoint_root, resolve_resume

logger = logging.getLogger("roll.pipeline")
RUN_CONFIG_FILE = "run_config.json"

# Keys (with everything under them) whose value does not change what a step trains on: names and
# places, how often to log, save and validate, reporting, timeouts and retries, validation itself, and
# the SFT warm-up, which runs before step 1 (a resumed run is past it; the reference it warmed up is in
# the checkpoint, and require_parts says how to go on with a checkpoint that lacks it).
NOT_TRAINING_KEYS = frozenset({
    "sft_warmup", "exp_name", "logging_dir", "output_dir", "system_envs", "track_with", "tracker_kwargs", "checkpoint_config",
    "pipeline_cls", "save_steps", "logging_steps", "eval_steps", "resume_from_checkpoint", "warm_start_from",
    "max_auto_resumes", "max_infer_worker_restarts", "model_update_buffer_size_mb", "verify_weight_sync",
    "async_wait_timeout_s", "report", "alarms", "val_env_manager", "val_batch_size", "rollout_dump_dir",
})
# max_steps only sets where the run stops, unless a schedule decays over the run's length
_LR_SCHEDULES_OF_RUN_LENGTH = ("linear", "cosine")


def run_config(config: AgenticConfig) -> dict[str, Any]:
    """The config as saved beside a checkpoint: plain JSON values."""
    return json.loads(json.dumps(asdict(config), default=str))


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        flat: dict[str, Any] = {}
        for key, item in value.items():
            flat.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: value}


def training_differences(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """`key: saved -> now` for each dotted key whose value differs and changes training."""
    train_tags = set(current.get("train_env_manager", {}).get("tags", [])) | set(saved.get("train_env_manager", {}).get("tags", []))
    schedules = {(saved.get(role) or {}).get("training_args", {}).get("lr_scheduler_type")
                 for role in ("actor_train", "critic")} | {(current.get(role) or {}).get("training_args", {}).get("lr_scheduler_type")
                                                           for role in ("actor_train", "critic")}
    ignored = set(NOT_TRAINING_KEYS)
    if not schedules & set(_LR_SCHEDULES_OF_RUN_LENGTH):
        ignored.add("max_steps")
    old, new = _flatten(saved), _flatten(current)
    lines = []
    for key in sorted(old.keys() | new.keys()):
        parts = key.split(".")
        if parts[0] in ignored:
            continue
        if parts[0] == "custom_envs" and len(parts) > 1 and parts[1] not in train_tags:
            continue  # an env only validation plays
        if old.get(key, "<absent>") != new.get(key, "<absent>"):
            lines.append(f"{key}: {old.get(key, '<absent>')!r} -> {new.get(key, '<absent>')!r}")
    return lines


def check_resume(config: AgenticConfig) -> None:
    """The launcher's check: the checkpoint resume_from_checkpoint names (if any) was saved by this run."""
    checkpoint = resolve_resume(config.resume_from_checkpoint, checkpoint_root(config.output_dir, config.checkpoint_config))
    if checkpoint is not None:
        check_same_run(checkpoint, config)


def check_same_run(checkpoint: Path, config: AgenticConfig) -> None:
    """Refuses to resume a checkpoint saved by a run that trained differently (before any worker starts)."""
    saved_file = checkpoint / RUN_CONFIG_FILE
    if not saved_file.is_file():
        logger.warning("resume_from_checkpoint: %s holds no %s (saved before roll kept the run's config): "
                       "cannot check that this run trains as the saved one did", checkpoint, RUN_CONFIG_FILE)
        return
    differences = training_differences(json.loads(saved_file.read_text()), run_config(config))
    if differences:
        shown = "\n  ".join(differences[:20]) + (f"\n  … and {len(differences) - 20} more" if len(differences) > 20 else "")
        raise ConfigError(
            f"resume_from_checkpoint: {checkpoint} was saved by a run whose config differs in keys that change "
            f"training:\n  {shown}\nA resumed run continues the same run exactly. To start a new run from this "
            f"checkpoint's weights, use warm_start_from.checkpoint={checkpoint} (add warm_start_from.optimizer=true "
            f"to keep its optimizer state); to go on with the same run, resume with the saved values")


def warm_start_checkpoint(config: AgenticConfig) -> Path | None:
    """The checkpoint a warm-started run loads (None: no warm start), checked before any worker starts."""
    warm = config.warm_start_from
    if warm is None:
        return None
    if warm.checkpoint is None:
        raise ConfigError(f"warm_start_from.config={warm.config!r} names an earlier stage, which the launcher "
                          f"(examples/start_agentic_pipeline.py) runs first; a pipeline built directly needs "
                          f"warm_start_from.checkpoint (a checkpoint folder)")
    path = Path(warm.checkpoint)
    if not (path / STATE_FILE).is_file():
        raise ConfigError(f"warm_start_from.checkpoint: {path} is not a complete roll checkpoint (no {STATE_FILE})")
    return path


@dataclass
class EarlierStage:
    """A stage to run before this one: its config (resuming its own checkpoints) and the checkpoint it hands on."""

    name: str
    config: AgenticConfig
    checkpoint: Path

    @property
    def done(self) -> bool:
        return (self.checkpoint / STATE_FILE).is_file()


def earlier_stages(config: AgenticConfig, load_stage: Callable[[str], AgenticConfig]) -> list[EarlierStage]:
    """The chain of stages behind `warm_start_from: {config, step}`, first stage first, each loaded and
    validated by `load_stage(name)`. Each run's warm_start_from then names its stage's checkpoint. A
    stage whose checkpoint exists is not run again, nor are the stages before it."""
    chain: list[EarlierStage] = []
    current, seen = config, []
    while current.warm_start_from is not None and current.warm_start_from.config is not None:
        warm = current.warm_start_from
        if warm.config in seen:
            raise ConfigError(f"warm_start_from: the stages name each other in a cycle: {' -> '.join(seen + [warm.config])}")
        seen.append(warm.config)
        stage = load_stage(warm.config)
        target = checkpoint_root(stage.output_dir, stage.checkpoint_config) / f"checkpoint-{warm.step}"
        saves_it = warm.step <= stage.max_steps and (warm.step % stage.save_steps == 0 or warm.step == stage.max_steps)
        if not (target / STATE_FILE).is_file() and not saves_it:
            raise ConfigError(f"warm_start_from: stage {warm.config!r} never saves checkpoint-{warm.step} (its max_steps="
                              f"{stage.max_steps}, save_steps={stage.save_steps}); name a step it saves")
        warm.checkpoint, warm.config, warm.step = str(target), None, None
        stage.resume_from_checkpoint = True  # an interrupted stage goes on where it stopped
        chain.append(EarlierStage(seen[-1], stage, target))
        if (target / STATE_FILE).is_file():
            break
        current = stage
    return chain[::-1]


def run_earlier_stages(stages: list[EarlierStage], run: Callable[[AgenticConfig], None]) -> None:
    for stage in stages:
        if stage.done:
            logger.info("warm_start_from: stage %s's %s exists; not run again", stage.name, stage.checkpoint)
            continue
        logger.info("warm_start_from: running stage %s first, up to its %s", stage.name, stage.checkpoint.name)
        run(stage.config)
        if not stage.done:
            raise RuntimeError(f"warm_start_from: stage {stage.name!r} finished without writing {stage.checkpoint}")
