"""The report with step-wise samples: each sample holds one turn's prompt and reply, so the page draws the
replayed episode with that sample's tokens under its own turn, not under turn 1 (rendered in Chromium)."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

from transformers import AutoTokenizer

from roll.agentic.env import make_env
from roll.launch.loader import load_config
from roll.configs.agentic_config import AgenticConfig
from roll.pipeline.agentic.trajectory import TokenBuffer, Trajectory
from roll.pipeline.agentic.trajectory_batch import trajectories_to_batch
from roll.viewer.records import TrajectoryRecorder
from roll.viewer.report import write_report
from tests.conftest import REPO_ROOT
from tests.pipeline.test_report import headless

REPLIES = ["<answer>Right</answer>", "<answer>Down</answer>", "<answer>Up</answer>"]


class SampleTurns(HTMLParser):
    """Per episode entry: the summary text, and per drawn turn whether it is marked and its reply tokens."""

    def __init__(self) -> None:
        super().__init__()
        self.entries: list[dict] = []
        self.in_summary = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "details" and "episode" in classes:
            self.entries.append({"summary": "", "turns": []})
        elif tag == "summary" and self.entries and not self.entries[-1]["turns"]:
            self.in_summary = True
        elif tag == "div" and "turn" in classes and self.entries:
            self.entries[-1]["turns"].append({"marked": "sample-turn" in classes, "reply_tokens": 0})
        elif tag == "span" and "resp" in classes and self.entries and self.entries[-1]["turns"]:
            self.entries[-1]["turns"][-1]["reply_tokens"] += 1

    def handle_endtag(self, tag):
        if tag == "summary":
            self.in_summary = False

    def handle_data(self, data):
        if self.in_summary:
            self.entries[-1]["summary"] += data


def rendered_report(config: AgenticConfig, samples: list[Trajectory], tokenizer, tmp_path) -> str:
    """The DOM Chromium builds from the report of `samples` saved as step 1 (every episode opened)."""
    logs = Path(config.logging_dir)
    TrajectoryRecorder(config).save(trajectories_to_batch(samples, tokenizer.pad_token_id or 0), step=1)
    (logs / "metrics.jsonl").write_text(json.dumps({"step": 1, "critic/score/mean": 0.0}) + "\n")
    dom = headless(write_report(logs).as_uri() + "#open", tmp_path / "profile", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    return dom.stdout


def test_a_step_samples_tokens_are_drawn_under_its_own_turn(tiny_model_dir, tmp_path):
    logs = tmp_path / "logs"
    config = load_config(REPO_ROOT / "examples/smollm2-135M-agentic_cpu", "agent_val_frozen_lake",
                         [f"pretrain={tiny_model_dir}", f"logging_dir={logs}"], config_cls=AgenticConfig)
    spec = config.custom_envs["FrozenLakeCPU"]
    env = make_env(spec.env_type, **spec.env_config)
    env.reset(7)
    rewards = [env.step(reply)[1] for reply in REPLIES]  # what the replay must reproduce
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    samples = []
    for turn, reply in enumerate(REPLIES):
        tokens = TokenBuffer()
        tokens.add_prompt(tokenizer(f"the last turns, then board {turn}")["input_ids"])
        reply_ids = tokenizer(reply)["input_ids"]
        tokens.add_response(reply_ids, [-0.25] * len(reply_ids))
        samples.append(Trajectory.from_tokens(
            tokens, score=sum(rewards), step_rewards=rewards, actions=REPLIES, messages=[{"role": "user", "content": "b"}],
            env_metrics={"success": 0.0}, tag="FrozenLakeCPU", env_seed=7, stop_reason="max_steps",
            generated_tokens=len(reply_ids), traj_id="g0-0", step_index=turn, state_key=f"s{turn}"))
    page = SampleTurns()
    page.feed(rendered_report(config, samples, tokenizer, tmp_path))
    assert len(page.entries) == 3
    for turn, entry in enumerate(page.entries):
        assert f"step sample of turn {turn + 1}" in entry["summary"]
        assert len(entry["turns"]) == 3, "the whole replayed episode is drawn"
        assert [t["marked"] for t in entry["turns"]] == [k == turn for k in range(3)]
        reply_len = len(tokenizer(REPLIES[turn])["input_ids"])
        assert [t["reply_tokens"] for t in entry["turns"]] == [reply_len if k == turn else 0 for k in range(3)]


def test_saved_episodes_keep_every_turn_of_a_step_wise_episode(tiny_model_dir, tmp_path):
    """report.trajectories_per_step counts episodes: with 1, both samples of the first two-turn episode
    are saved and none of the second episode's."""
    config = load_config(REPO_ROOT / "examples/smollm2-135M-agentic_cpu", "agent_val_frozen_lake",
                         [f"pretrain={tiny_model_dir}", f"logging_dir={tmp_path}", "report.trajectories_per_step=1"],
                         config_cls=AgenticConfig)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    samples = []
    for episode in ("g0-0", "g0-1"):
        for turn, reply in enumerate(REPLIES[:2]):
            tokens = TokenBuffer()
            tokens.add_prompt(tokenizer(f"board {turn}")["input_ids"])
            reply_ids = tokenizer(reply)["input_ids"]
            tokens.add_response(reply_ids, [-0.25] * len(reply_ids))
            samples.append(Trajectory.from_tokens(
                tokens, score=0.0, step_rewards=[0.0, 0.0], actions=REPLIES[:2], messages=[{"role": "user", "content": "b"}],
                env_metrics={"success": 0.0}, tag="FrozenLakeCPU", env_seed=7, stop_reason="max_steps",
                generated_tokens=len(reply_ids), traj_id=episode, step_index=turn, state_key=f"s{turn}"))
    path = TrajectoryRecorder(config).save(trajectories_to_batch(samples, tokenizer.pad_token_id or 0), step=1)
    rows = json.loads(path.read_text())
    assert [(row["traj_id"], row["step_index"]) for row in rows] == [("g0-0", 0), ("g0-0", 1)]
