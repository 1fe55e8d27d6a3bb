"""The run report: one static HTML file (no server, any browser) from what a run wrote under logging_dir.

It shows the steps and validations with their metrics and alarms, the learning-curve PNGs, and every
saved episode: per turn the board, the full reply, the parsed action, validity, reward and the
turn's tokens coloured by response mask with their log-probs on hover; filters by kind, tag,
success and step; and the same validation map at two steps side by side. The data is embedded as
JSON and an episode's turns are drawn only when it is opened, so hundreds of episodes load fast.
"""

from __future__ import annotations

import html
import json
import time
from pathlib import Path
from typing import Any

from roll.viewer.page import PAGE_SCRIPT, PAGE_STYLE
from roll.viewer.plots import read_metrics
from roll.viewer.records import load_trajectories

REPORT_NAME = "report.html"


def step_rows(rows: list[dict[str, float]]) -> list[dict[str, Any]]:
    """One summary per logged step: the numbers worth a glance and the alarms that tripped."""

    def mean_of(row: dict[str, float], prefix: str, suffix: str) -> float | None:
        values = [v for k, v in row.items() if k.startswith(prefix) and k.endswith(suffix)]
        return sum(values) / len(values) if values else None

    by_step: dict[int, dict[str, float]] = {}
    for row in rows:  # a step may log twice (step 0: the first validation, then the SFT warm-up)
        by_step.setdefault(int(row["step"]), {}).update(row)
    out = []
    for _, row in sorted(by_step.items()):
        out.append({
            "step": int(row["step"]),
            "success": mean_of(row, "env/", "/success"),
            "valid": mean_of(row, "env/", "/action_is_valid"),
            "score": row.get("critic/score/mean"),
            "entropy": row.get("actor/entropy"),
            "kl": row.get("critic/kl"),
            "val_success": mean_of(row, "val/env/", "/success"),
            "val_valid": mean_of(row, "val/env/", "/action_is_valid"),
            "step_s": row.get("time/step_total"),
            "alarms": sorted(k.removeprefix("alarm/") for k, v in row.items() if k.startswith("alarm/") and v >= 1.0),
        })
    return out


def find_logging_dir(path: str | Path) -> Path:
    """A run's logging_dir (it holds metrics.jsonl), given it or any folder above it (e.g. output/<exp>)."""
    path = Path(path)
    if (path / "metrics.jsonl").is_file():
        return path
    found = sorted(p.parent for p in path.rglob("metrics.jsonl")) if path.is_dir() else []
    if len(found) == 1:
        return found[0]
    if not found:
        raise FileNotFoundError(f"no metrics.jsonl under {path}: give a run's logging_dir or its output folder (e.g. output/<exp_name>)")
    raise ValueError(f"{path} holds several runs ({', '.join(map(str, found))}); give one of these folders")


def write_report(logging_dir: str | Path, title: str | None = None) -> Path:
    """Writes logging_dir/report.html from metrics.jsonl, trajectories/ and plots/; returns its path."""
    logging_dir = Path(logging_dir)
    rows = read_metrics(logging_dir)
    plots = sorted(p.name for p in (logging_dir / "plots").glob("*.png"))
    data = {
        "title": title or logging_dir.resolve().parent.name,
        "written": time.strftime("%Y-%m-%d %H:%M:%S"),
        "steps": step_rows(rows),
        "plots": [f"plots/{name}" for name in plots],
        "episodes": load_trajectories(logging_dir),
    }
    # "</" inside a <script> block would end it early; JSON allows "<\/" for the same text
    payload = json.dumps(data, ensure_ascii=False).replace("</", "<\\/").replace("<!--", "<\\!--")
    page = (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(data['title'])} · roll report</title><style>{PAGE_STYLE}</style></head>\n"
            f"<body><div id=\"app\"><h1>{html.escape(data['title'])}</h1><noscript>This report needs JavaScript.</noscript></div>\n"
            f"<script id=\"run-data\" type=\"application/json\">{payload}</script>\n<script>{PAGE_SCRIPT}</script></body></html>\n")
    path = logging_dir / REPORT_NAME
    path.write_text(page)
    return path
