"""The optional envs' configs validate without their packages (a bad config fails before any worker
starts, whether or not GEM / TextWorld are installed), and our example entries are valid."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from roll.agentic.env import make_env_config


def test_example_entries_of_optional_envs_validate():
    entries = OmegaConf.to_container(OmegaConf.load("examples/config/envs.yaml"), resolve=True)["custom_env"]
    for tag in ("GemGuessTheNumber", "GemTowerofHanoi", "GemLegCounting", "TextWorldSmall"):
        config = make_env_config(entries[tag]["env_type"], **entries[tag]["env_config"])
        assert config.max_steps == entries[tag]["max_steps"], tag


@pytest.mark.parametrize("env_type, env_config, message", [
    ("gem", {"gem_id": "GuessTheNumber"}, "env_config.gem_id"),
    ("gem", {"gem_id": "rg:leg_counting", "gem_kwarg": {}}, "Did you mean 'gem_kwargs'"),
    ("textworld", {"reward": "dense"}, "env_config.reward"),
    ("textworld", {"show_admissible_commands": "yes"}, "env_config.show_admissible_commands"),
    ("textworld", {"nb_room": 3}, "Did you mean 'nb_rooms'"),
])
def test_bad_optional_env_configs_fail_without_the_package(env_type, env_config, message):
    with pytest.raises(ValueError, match=message):
        make_env_config(env_type, **env_config)
