"""Learning-curve PNGs from a run's metrics.jsonl, and `plots/curves.json`: the points each PNG shows,
read back from the drawn figure (so a check of the JSON is a check of the picture's data)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PHASE_KEYS = (("time/step_model_update", "weight sync"), ("time/step_val", "validation"), ("time/step_rollout", "rollout"),
              ("time/step_logprobs", "log-probs"), ("time/step_train", "training"))


@dataclass(frozen=True)
class Curve:
    name: str  # file stem
    title: str
    ylabel: str
    pattern: str  # metric keys drawn, as a regular expression


CURVES = (
    # val/blind/<tag>/best: the best map-blind policy on the same maps, the line the agent must beat
    Curve("validation", "Validation success and action validity per tag, and the map-blind best", "share of episodes",
          r"^val/(env/[^/]+/(success|action_is_valid)|blind/[^/]+/best)$"),
    Curve("train_score", "Training: score and success per tag", "value", r"^(critic/score/mean|env/[^/]+/success)$"),
    Curve("entropy", "Entropy (nats per response token)", "nats", r"^(actor/entropy|collapse/rollout_entropy)$"),
    Curve("kl", "KL to the reference / to the old policy", "KL", r"^(critic/kl|actor/approxkl|actor/kl_loss)$"),
    Curve("response_length", "Response tokens per episode", "tokens", r"^env/[^/]+/response_length$"),
)


def read_metrics(logging_dir: str | Path) -> list[dict[str, float]]:
    path = Path(logging_dir) / "metrics.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: give the logging_dir of a run (it holds metrics.jsonl)")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def series(rows: list[dict[str, float]], pattern: str) -> dict[str, list[tuple[int, float]]]:
    """Metric key -> [(step, value)] for every key matching `pattern`, in step order."""
    regex, out = re.compile(pattern), {}
    for row in sorted(rows, key=lambda r: r["step"]):
        for key, value in row.items():
            if key != "step" and regex.search(key):
                out.setdefault(key, []).append((int(row["step"]), float(value)))
    return dict(sorted(out.items()))


def write_plots(logging_dir: str | Path) -> list[Path]:
    """One PNG per curve that has data, plus the step-time split; returns the PNG paths."""
    from matplotlib.figure import Figure

    rows = read_metrics(logging_dir)
    folder = Path(logging_dir) / "plots"
    folder.mkdir(parents=True, exist_ok=True)
    drawn: dict[str, dict[str, Any]] = {}
    paths = []
    for curve in CURVES:
        data = series(rows, curve.pattern)
        if not data:
            continue
        fig = Figure(figsize=(7, 3.6), dpi=100)
        ax = fig.add_subplot()
        for key, points in data.items():
            steps, values = zip(*points)
            ax.plot(steps, values, marker="o", markersize=3, label=key)
        _finish(ax, curve.title, curve.ylabel)
        drawn[curve.name] = {line.get_label(): [[float(x), float(y)] for x, y in zip(line.get_xdata(), line.get_ydata())]
                             for line in ax.get_lines()}
        paths.append(_save(fig, folder / f"{curve.name}.png"))
    times = {label: dict(series(rows, f"^{re.escape(key)}$").get(key, [])) for key, label in PHASE_KEYS}
    steps = sorted({s for by_step in times.values() for s in by_step})
    if steps:
        fig = Figure(figsize=(7, 3.6), dpi=100)
        ax = fig.add_subplot()
        bottom = [0.0] * len(steps)
        for label, by_step in times.items():
            heights = [by_step.get(s, 0.0) for s in steps]
            ax.bar(steps, heights, bottom=bottom, label=label)
            bottom = [b + h for b, h in zip(bottom, heights)]
        _finish(ax, "Step time by phase", "seconds")
        drawn["step_time"] = {c.get_label(): [[p.get_x() + p.get_width() / 2, p.get_height()] for p in c.patches]
                              for c in ax.containers}
        paths.append(_save(fig, folder / "step_time.png"))
    (folder / "curves.json").write_text(json.dumps(drawn, indent=1))
    return paths


def _finish(ax, title: str, ylabel: str) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path)
    return path
