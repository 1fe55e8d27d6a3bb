"""Metric trackers: a compact stdout line, a metrics.jsonl file, TensorBoard and wandb.

`Tracker(track_with="stdout,tensorboard", ...)` fans each `log(metrics, step)` out to every backend
named; backends are registered by name (`register_tracker`), and validation accepts any registered
name. metrics.jsonl under logging_dir always gets the full dict, one line per step, so a run (and a
resumed run) can be read back without TensorBoard.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

from roll.utils.registry import Registry

logger = logging.getLogger("roll.metrics")

# The few numbers worth a glance on every step's stdout line, in this order (short label, metric key suffix).
_HEADLINE = (
    ("success", "/success"), ("valid", "/action_is_valid"), ("score", "critic/score/mean"),
    ("pg_loss", "actor/pg_loss"), ("kl", "critic/kl"), ("entropy", "actor/entropy"),
    ("tps", "system/tps"),
)
# Every phase's seconds, so a step line says where the time went.
_TIMINGS = (("sync", "time/step_model_update"), ("val", "time/step_val"), ("rollout", "time/step_rollout"),
            ("logp", "time/step_logprobs"), ("train", "time/step_train"), ("step", "time/step_total"))


def headline(metrics: dict[str, float]) -> str:
    parts = []
    for label, key in _HEADLINE:
        if key.startswith("/"):
            values = [v for k, v in metrics.items() if k.startswith("env/") and k.endswith(key)]
            if values:
                parts.append(f"{label} {sum(values) / len(values):.3f}")
        elif key in metrics:
            parts.append(f"{label} {metrics[key]:.4g}")
    val = [v for k, v in metrics.items() if k.startswith("val/") and k.endswith("/success")]
    if val:
        parts.append(f"val_success {sum(val) / len(val):.3f}")
    blind = [v for k, v in metrics.items() if k.startswith("val/blind/") and k.endswith("/best")]
    if blind:
        parts.append(f"map-blind best {sum(blind) / len(blind):.3f}")
    timings = [f"{label} {metrics[key]:.1f}" for label, key in _TIMINGS if key in metrics]
    if timings:
        parts.append("time s: " + " ".join(timings))
    return " | ".join(parts)


@dataclass(frozen=True)
class TrackerRun:
    """What a tracker backend is built from: the run's `tracker_kwargs`, where logs go, the run's name,
    its config (a plain dict) and the first step it will log (> 0 on a resumed run)."""

    tracker_kwargs: dict[str, Any]
    logging_dir: Path
    exp_name: str
    config: dict[str, Any] | None = None
    start_step: int = 0


class TrackerBackend(Protocol):
    def log(self, metrics: dict[str, float], step: int) -> None: ...

    def close(self) -> None: ...


# `track_with` names: each builds a backend from a TrackerRun (a class whose __init__ takes one works).
TRACKERS: Registry[Callable[[TrackerRun], TrackerBackend]] = Registry("track_with")


def register_tracker(name: str, *, replace: bool = False) -> Callable:
    """Decorator registering a backend factory (`cls(run: TrackerRun)` with `log(metrics, step)` and `close()`)."""
    return TRACKERS.register(name, replace=replace)


def tracker_names(track_with: str) -> list[str]:
    """The backend names of a comma-joined `track_with`."""
    return [name.strip() for name in track_with.split(",") if name.strip()]


class Tracker:
    """Writes metrics.jsonl and fans each `log(metrics, step)` out to the backends `track_with` names."""

    def __init__(self, track_with: str, tracker_kwargs: dict[str, Any], logging_dir: str, exp_name: str,
                 config: dict[str, Any] | None = None, start_step: int = 0) -> None:
        self.logging_dir = Path(logging_dir)
        self.logging_dir.mkdir(parents=True, exist_ok=True)
        self.jsonl_path = self.logging_dir / "metrics.jsonl"
        _truncate_jsonl(self.jsonl_path, start_step)
        run = TrackerRun(dict(tracker_kwargs), self.logging_dir, exp_name, config, start_step)
        self.backends = [TRACKERS.get(name)(run) for name in tracker_names(track_with)]

    def log(self, metrics: dict[str, float], step: int) -> None:
        clean = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and math.isfinite(float(v))}
        with self.jsonl_path.open("a") as f:
            f.write(json.dumps({"step": step, **clean}) + "\n")
        for backend in self.backends:
            backend.log(clean, step)

    def close(self) -> None:
        for backend in self.backends:
            backend.close()


@register_tracker("stdout")
class StdoutTracker:
    """One compact line per step on the `roll.metrics` logger (see `headline`)."""

    def __init__(self, run: TrackerRun) -> None:
        pass

    def log(self, metrics: dict[str, float], step: int) -> None:
        logger.info("step %d | %s", step, headline(metrics))

    def close(self) -> None:
        pass


@register_tracker("tensorboard")
class TensorBoardTracker:
    """Scalars under `tracker_kwargs.log_dir` (default logging_dir/tensorboard)."""

    def __init__(self, run: TrackerRun) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.log_dir = run.tracker_kwargs.get("log_dir") or str(run.logging_dir / "tensorboard")
        # purge_step drops events a crashed run wrote after its last checkpoint, so a resumed run's curves stay one line.
        self.writer = SummaryWriter(log_dir=self.log_dir, purge_step=run.start_step or None)

    def log(self, metrics: dict[str, float], step: int) -> None:
        for key, value in metrics.items():
            self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


@register_tracker("wandb")
class WandbTracker:
    """A wandb run; `tracker_kwargs`: project, name, notes, tags, mode, id, api_key."""

    def __init__(self, run: TrackerRun) -> None:
        self.run = _init_wandb(run.tracker_kwargs, run.exp_name, run.config, run.logging_dir)

    def log(self, metrics: dict[str, float], step: int) -> None:
        self.run.log(metrics, step=step)

    def close(self) -> None:
        self.run.finish()


def _truncate_jsonl(path: Path, start_step: int) -> None:
    """On resume, keep only the lines of steps before `start_step` (a crash may have logged past the checkpoint)."""
    if not path.exists():
        return
    if start_step == 0:
        path.unlink()
        return
    kept = [line for line in path.read_text().splitlines() if line and json.loads(line).get("step", 0) < start_step]
    path.write_text("".join(line + "\n" for line in kept))


def _init_wandb(kwargs: dict[str, Any], exp_name: str, config: dict[str, Any] | None, logging_dir: Path):
    try:
        import wandb
    except ImportError:
        raise RuntimeError("track_with names wandb, which is not installed: pip install 'roll[wandb]' (or drop wandb from track_with)") from None
    if kwargs.get("api_key"):
        wandb.login(key=kwargs["api_key"])
    return wandb.init(
        project=kwargs.get("project", "roll"), name=kwargs.get("name", exp_name), notes=kwargs.get("notes"),
        tags=kwargs.get("tags"), config=config, dir=str(logging_dir), mode=kwargs.get("mode"),
        id=kwargs.get("id"), resume="allow",
    )
