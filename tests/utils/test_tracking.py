"""Trackers write what they are given: metrics.jsonl, TensorBoard events, a wandb offline run."""

import json
import logging
import time

import pytest

from roll.utils.tracking import Tracker, headline


def test_jsonl_and_tensorboard_hold_every_finite_metric(tmp_path):
    tracker = Tracker("stdout,tensorboard", {"log_dir": str(tmp_path / "tb")}, str(tmp_path / "logs"), "exp")
    tracker.log({"actor/pg_loss": 0.5, "env/A/success": 0.25, "bad": float("nan")}, 1)
    tracker.log({"actor/pg_loss": 0.125}, 2)
    tracker.close()
    rows = [json.loads(line) for line in (tmp_path / "logs" / "metrics.jsonl").read_text().splitlines()]
    assert rows == [{"step": 1, "actor/pg_loss": 0.5, "env/A/success": 0.25}, {"step": 2, "actor/pg_loss": 0.125}]

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("actor/pg_loss")] == [(1, 0.5), (2, 0.125)]
    assert "bad" not in events.Tags()["scalars"]


def test_resume_drops_lines_logged_after_the_checkpoint(tmp_path):
    first = Tracker("stdout", {}, str(tmp_path), "exp")
    for step in (1, 2, 3):
        first.log({"x": float(step)}, step)
    resumed = Tracker("stdout", {}, str(tmp_path), "exp", start_step=3)  # checkpoint after step 2
    resumed.log({"x": 30.0}, 3)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["x"]) for r in rows] == [(1, 1.0), (2, 2.0), (3, 30.0)]


def test_stdout_line_shows_the_headline_numbers(tmp_path, caplog):
    tracker = Tracker("stdout", {}, str(tmp_path), "exp")
    with caplog.at_level(logging.INFO, logger="roll.metrics"):
        tracker.log({"env/A/success": 0.5, "env/B/success": 0.25, "actor/pg_loss": -0.01, "val/env/A/success": 1.0}, 7)
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("step 7 |") and "success 0.375" in line and "pg_loss -0.01" in line and "val_success 1.000" in line
    assert headline({}) == ""


def test_wandb_offline_run_records_the_metrics(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_SILENT", "true")
    tracker = Tracker("wandb", {"mode": "offline", "project": "roll-test"}, str(tmp_path), "exp", config={"seed": 1})
    tracker.log({"actor/pg_loss_marker": 0.5}, 1)
    tracker.close()
    (run_file,) = tmp_path.glob("wandb/offline-run-*/run-*.wandb")
    deadline = time.monotonic() + 20  # wandb's service process writes the run file after finish() returns
    while b"actor/pg_loss_marker" not in run_file.read_bytes() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert b"actor/pg_loss_marker" in run_file.read_bytes()


def test_unknown_wandb_without_package_explains(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_wandb(name, *args, **kwargs):
        if name == "wandb":
            raise ImportError("no wandb")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_wandb)
    with pytest.raises(RuntimeError, match="pip install 'roll\\[wandb\\]'"):
        Tracker("wandb", {}, str(tmp_path), "exp")


def test_a_registered_tracker_receives_the_metrics_and_validates(tmp_path, monkeypatch):
    from roll.configs import ConfigError
    from roll.launch.loader import load_agentic_config
    from roll.utils.tracking import TRACKERS, register_tracker

    monkeypatch.setattr(TRACKERS, "_entries", dict(TRACKERS._entries))
    received = []

    @register_tracker("list_test")
    class ListTracker:
        def __init__(self, run):
            self.prefix = run.tracker_kwargs["prefix"]

        def log(self, metrics, step):
            received.append((step, {self.prefix + k: v for k, v in metrics.items()}))

        def close(self):
            received.append("closed")

    tracker = Tracker("stdout, list_test", {"prefix": "p/"}, str(tmp_path), "exp")
    tracker.log({"a": 1.0, "nan": float("nan")}, 3)
    tracker.close()
    assert received == [(3, {"p/a": 1.0}), "closed"]  # the same cleaned metrics as metrics.jsonl

    cpu = ("examples/smollm2-135M-agentic_cpu", "agent_val_frozen_lake")
    assert load_agentic_config(*cpu, overrides=["track_with='stdout,list_test'"]).track_with == "stdout,list_test"
    with pytest.raises(ConfigError, match=r"unknown tracker 'list_tset'.*'list_test'.*Did you mean 'list_test'"):
        load_agentic_config(*cpu, overrides=["track_with=list_tset"])
