"""The report labels the turns `random_action_rate` played: episodes from the real env manager (its policy
stand-in always answers a move FrozenLake lacks, so every legal move is a random turn), saved by the
recorder and rendered in Chromium."""

from __future__ import annotations

import dataclasses
from html.parser import HTMLParser

from transformers import AutoTokenizer

from roll.launch.loader import load_config
from roll.configs.agentic_config import AgenticConfig
from roll.pipeline.agentic.env_manager.traj_env_manager import TrajEnvManager
from roll.pipeline.agentic.llm_proxy import RandomProxy
from tests.conftest import REPO_ROOT
from tests.rollout.helpers import manager_config
from tests.utils.test_viewer_step_samples import rendered_report

POLICY_TEXT = "<answer>Stay</answer>"


class TurnLabels(HTMLParser):
    """Per episode entry (by data-traj): per drawn turn, whether its heading carries the random-move label."""

    def __init__(self) -> None:
        super().__init__()
        self.turns: dict[str, list[bool]] = {}
        self.current = ""

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "details" and "episode" in classes:
            self.current = a["data-traj"]
            self.turns[self.current] = []
        elif tag == "div" and "turn" in classes:
            self.turns[self.current].append(False)
        elif tag == "span" and "random-turn" in classes:
            self.turns[self.current][-1] = True


def test_the_report_labels_exactly_the_random_turns(tiny_model_dir, tmp_path):
    config = load_config(REPO_ROOT / "examples/smollm2-135M-agentic_cpu", "agent_val_frozen_lake",
                         [f"pretrain={tiny_model_dir}", f"logging_dir={tmp_path / 'logs'}", "report.trajectories_per_step=4"],
                         config_cls=AgenticConfig)
    spec = dataclasses.replace(config.custom_envs["FrozenLakeCPU"], max_steps=6)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    manager = TrajEnvManager("FrozenLakeCPU", spec, manager_config(random_action_rate=0.5), tokenizer,
                             RandomProxy(tokenizer, answers=["Stay"], seed=0), sequence_length=4096)
    samples = []
    for seed in range(4):
        (sample,) = manager.run_episode(seed)
        sample.traj_id = f"g{seed}-0"
        samples.append(sample)
    expected = {s.traj_id: [action != POLICY_TEXT for action in s.actions] for s in samples}
    assert any(any(flags) for flags in expected.values()) and any(not all(f) for f in expected.values())
    page = TurnLabels()
    page.feed(rendered_report(config, samples, tokenizer, tmp_path))
    assert page.turns == expected
