"""The envs files load: ours (examples/config/envs.yaml) and ROLL's own (ROLL_EXAMPLES_DIR/config)."""

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from roll.agentic.env import list_env_types, make_env
from roll.agentic.env.policies import run_scripted_episode

from tests.conftest import ROLL_EXAMPLES, requires_roll_examples

REPO = Path(__file__).resolve().parents[2]
OUR_TAGS = ["SimpleSokoban", "LargerSokoban", "SokobanDifferentGridVocab", "FrozenLake", "FrozenLakeThink",
            "Countdown", "GuessNumber"]


def custom_env_entries(path: Path) -> dict:
    return OmegaConf.to_container(OmegaConf.load(path), resolve=True)["custom_env"]


def test_our_envs_file_defines_the_tags_and_each_plays_to_success():
    entries = custom_env_entries(REPO / "examples" / "config" / "envs.yaml")
    assert set(OUR_TAGS) <= set(entries)
    for tag in OUR_TAGS:
        entry = entries[tag]
        assert {"env_type", "max_steps", "max_tokens_per_step", "agent_system_template", "agent_template",
                "env_config"} <= set(entry)
        env = make_env(entry["env_type"], **entry["env_config"])
        assert env.config.max_steps == entry["max_steps"]
        for seed in range(5):  # the optimal policy wins within the entry's turn budget
            episode = run_scripted_episode(env, seed, "optimal")
            assert episode.success and episode.num_turns <= entry["max_steps"], (tag, seed)


@requires_roll_examples
def test_rolls_envs_file_builds_every_env_we_implement():
    entries = custom_env_entries(ROLL_EXAMPLES / "config" / "traj_envs.yaml")
    built = 0
    for tag, entry in entries.items():
        if entry["env_type"] not in list_env_types():
            continue  # webshop needs its own server; not bundled
        env = make_env(entry["env_type"], **entry["env_config"])
        obs, info = env.reset(seed=0)
        assert obs and info["env_instruction"]
        built += 1
    assert built == 5


@requires_roll_examples
def test_rolls_locally_defined_frozen_lake_example_builds_with_its_instruction():
    cfg = OmegaConf.load(ROLL_EXAMPLES / "qwen2.5-0.5B-agentic" / "agent_val_frozen_lake.yaml")
    envs = OmegaConf.merge(OmegaConf.load(ROLL_EXAMPLES / "config" / "traj_envs.yaml"), cfg)
    entry = OmegaConf.to_container(envs, resolve=True)["custom_envs"]["FrozenLakeLocallyDefineExamples"]
    env = make_env(entry["env_type"], **entry["env_config"])
    _, info = env.reset(seed=0)
    assert info["env_instruction"].startswith(entry["env_config"]["env_instruction"])
    assert env.step("<think>down looks safe</think><answer>down</answer>")[4]["action"] == "Down"
