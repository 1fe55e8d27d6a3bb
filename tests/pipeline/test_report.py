"""What a user sees of a run: one real two-step run (the launcher, a tiny model, real Ray, output to a
file) is read back as its HTML report in headless Chromium, its plots, its saved trajectories and its
progress lines."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from tests.conftest import REPO_ROOT
from tests.pipeline.test_end_to_end import overrides, run_to_end

TRAIN_SAVED, VAL_SAVED = 3, 4


@pytest.fixture(scope="module")
def run(tiny_model_dir):
    """Two steps with a validation before each and one after; the launcher's output goes to a file."""
    work = Path(tempfile.mkdtemp(prefix="rep", dir="/tmp"))  # Ray's socket paths must stay short
    patch = pytest.MonkeyPatch()
    patch.setenv("RAY_raylet_start_wait_time_s", "180")  # a busy machine's Ray start-up is slow, not broken
    extra = {"eval_steps": "1", "save_steps": "10", "sft_warmup.steps": "0", "report.trajectories_per_step": str(TRAIN_SAVED),
             "report.val_trajectories": str(VAL_SAVED), "track_with": "stdout"}
    try:
        output = run_to_end(overrides(tiny_model_dir, work, max_steps=2, extra=extra), work)
        yield work, output
    finally:
        patch.undo()
        shutil.rmtree(work, ignore_errors=True)


def saved_episodes(logs: Path) -> list[dict]:
    return [row for path in sorted((logs / "trajectories").glob("*.json")) for row in json.loads(path.read_text())]


def metrics_rows(logs: Path) -> list[dict]:
    return [json.loads(line) for line in (logs / "metrics.jsonl").read_text().splitlines() if line.strip()]


def flat(points) -> list[float]:
    return [float(v) for point in points for v in point]


class EpisodeEntries(HTMLParser):
    """Collects each `details.episode` of the rendered page: its attributes, summary text, turns and tokens."""

    def __init__(self) -> None:
        super().__init__()
        self.entries: list[dict] = []
        self.depth = 0  # <details> nesting inside the current entry
        self.in_summary = False
        self.compare_seeds: list[str] = []
        self.table_steps: list[int] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "details" and "episode" in classes:
            self.entries.append({"attrs": a, "summary": "", "turns": 0, "reply_tokens": 0})
            self.depth = 1
            return
        if tag == "tr" and "data-step" in a:
            self.table_steps.append(int(a["data-step"]))
        if tag == "div" and "compare" in classes:
            self.compare_seeds.append(a["data-seed"])
        if not self.depth:
            return
        entry = self.entries[-1]
        if tag == "details":
            self.depth += 1
        elif tag == "summary" and self.depth == 1:
            self.in_summary = True
        elif tag == "div" and "turn" in classes:
            entry["turns"] += 1
        elif tag == "span" and "resp" in classes and (a.get("title") or "").startswith("log-prob "):
            entry["reply_tokens"] += 1

    def handle_endtag(self, tag):
        if tag == "summary":
            self.in_summary = False
        elif tag == "details" and self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if self.in_summary:
            self.entries[-1]["summary"] += data


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    pytest.skip("no headless browser: install Debian's chromium (bash scripts/install_browser.sh) to render the report")


def headless(url: str, profile: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                           f"--user-data-dir={profile}", *flags, url], capture_output=True, text=True, timeout=120)


def test_report_in_chromium_has_one_entry_per_saved_episode(run, tmp_path):
    work, _ = run
    logs = work / "logs"
    report = logs / "report.html"
    dom = headless(report.as_uri() + "#open", tmp_path / "profile", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    page = EpisodeEntries()
    page.feed(dom.stdout)
    episodes = saved_episodes(logs)
    assert len(episodes) == 2 * TRAIN_SAVED + 3 * VAL_SAVED  # steps 1, 2; validations before 1, 2 and after 2
    entries = {(e["attrs"]["data-kind"], e["attrs"]["data-traj"]): e for e in page.entries}
    assert len(entries) == len(page.entries) == len(episodes)
    for ep in episodes:
        entry = entries[(ep["kind"], ep["traj_id"])]
        turns = len(ep["step_rewards"])
        assert int(entry["attrs"]["data-turns"]) == turns
        assert json.loads(entry["attrs"]["data-rewards"]) == pytest.approx(ep["step_rewards"])
        assert f"{turns} turns" in entry["summary"]
        assert "rewards " + ", ".join(f"{r:.2f}" for r in ep["step_rewards"]) in entry["summary"]
        assert entry["turns"] == turns, "each turn drawn once"
        assert entry["reply_tokens"] == sum(ep["tokens"]["response_mask"]), "every generated token shown with its log-prob"
    assert page.table_steps == sorted({r["step"] for r in metrics_rows(logs)}), "one table row per logged step"
    val_seeds = {str(ep["env_seed"]) for ep in episodes if ep["kind"] == "val"}
    assert sorted(page.compare_seeds) == sorted(val_seeds), "the same validation maps side by side"

    shot = tmp_path / "report.png"
    taken = headless(report.as_uri() + "#open", tmp_path / "profile", f"--screenshot={shot}", "--window-size=1280,2000")
    assert taken.returncode == 0, taken.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


def test_saved_trajectories_carry_tokens_and_replayed_boards(run, tiny_model_dir):
    work, _ = run
    logs = work / "logs"
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    files = sorted(p.name for p in (logs / "trajectories").glob("*.json"))
    assert files == ["step_00001.json", "step_00002.json", "val_00001.json", "val_00002.json", "val_00003.json"]
    for path in (logs / "trajectories").glob("*.json"):
        assert len(json.loads(path.read_text())) == (VAL_SAVED if path.name.startswith("val") else TRAIN_SAVED)
    for ep in saved_episodes(logs):
        tokens = ep["tokens"]
        assert len(tokens["text"]) == len(tokens["response_mask"]) == len(tokens["logprobs"])
        replies, start = [], None
        for i, m in enumerate(tokens["response_mask"] + [0]):
            if m and start is None:
                start = i
            elif not m and start is not None:
                replies.append("".join(tokens["text"][start:i]))
                start = None
        assert len(replies) == len(ep["actions"])
        for text, action in zip(replies, ep["actions"]):
            assert text.replace(tokenizer.eos_token, "").strip() == action.strip()
        assert all(lp <= 0 for lp in tokens["logprobs"])
        # the replayed first board is the one the model was shown
        assert ep["turns"][0]["board"] in ep["messages"][1]["content"]
        assert [t["reward"] for t in ep["turns"]] == pytest.approx(ep["step_rewards"])
        assert all(isinstance(t["valid"], bool) for t in ep["turns"])


def test_plots_hold_the_logged_steps(run):
    work, output = run
    logs = work / "logs"
    rows = metrics_rows(logs)
    for name in ("validation", "train_score", "entropy", "kl", "response_length", "step_time"):
        png = logs / "plots" / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert str(png) in output, "the end-of-run summary lists every plot"
    curves = json.loads((logs / "plots" / "curves.json").read_text())
    train = [(r["step"], r["critic/score/mean"]) for r in rows if "critic/score/mean" in r]
    assert [s for s, _ in train] == [1, 2]
    assert flat(curves["train_score"]["critic/score/mean"]) == pytest.approx(flat(train))
    val_key = "val/env/FrozenLakeCPU/success"
    assert flat(curves["validation"][val_key]) == pytest.approx(flat([(r["step"], r[val_key]) for r in rows if val_key in r]))
    assert [x for x, _ in curves["validation"][val_key]] == [1, 2, 3]
    assert [x for x, _ in curves["step_time"]["training"]] == [1, 2]
    assert flat(curves["step_time"]["training"]) == pytest.approx(flat([(r["step"], r["time/step_train"]) for r in rows if "time/step_train" in r]))
    assert "report:" in output and str(logs / "report.html") in output


def test_progress_lines_and_alarm_metrics_in_the_log(run):
    work, output = run
    stamp = r"(\d\d:\d\d:\d\d) INFO roll\.progress: progress: "
    started = re.search(stamp + r"step 1/2 \| validation started", output)
    assert started, output[-3000:]
    after = output[started.end():]
    progress = re.search(stamp + r"step 1/2 \| validation (?:\d+ s|done in [\d.]+ s) \| episodes \d+/4 \| \d+ tok/s", after)
    assert progress, after[:3000]
    elapsed = datetime.strptime(progress.group(1), "%H:%M:%S") - datetime.strptime(started.group(1), "%H:%M:%S")
    assert elapsed.total_seconds() % 86400 <= 60, "a progress line within the first minute of rollout"
    step_lines = re.findall(r"roll\.metrics: step [12] \|.*", output)
    assert len(step_lines) == 2 and all(re.search(r"time s: sync [\d.]+ val [\d.]+ rollout [\d.]+ .*train [\d.]+ step [\d.]+", line)
                                        for line in step_lines), step_lines
    for row in metrics_rows(work / "logs"):
        if "actor/pg_loss" in row:
            assert {"alarm/entropy_collapse", "alarm/identical_replies", "collapse/rollout_entropy"} <= set(row)


def test_viewer_command_finds_the_run_under_a_folder(run, tmp_path):
    work, _ = run
    done = subprocess.run([sys.executable, "-m", "roll.viewer", str(work)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"report: {work / 'logs' / 'report.html'}" in done.stdout
    missing = subprocess.run([sys.executable, "-m", "roll.viewer", str(tmp_path)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "no metrics.jsonl" in missing.stderr
