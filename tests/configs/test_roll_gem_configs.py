"""ROLL's GEM game envs (config/traj_envs_gem_games.yaml) in a top-level config built the way a ROLL
user builds one: ROLL's agent_val_frozen_lake.yaml with its `defaults` pointed at the GEM games file
and its train/val tags set to the GEM game tags. ROLL's files are read in place (the config folder
is reached through a symlink in tmp_path, never copied) and the real launcher's `--dry-run --cpu`
checks the result. Nothing here starts Ray (each dry run checks it left Ray as it found it)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import ray
import yaml
from omegaconf import OmegaConf

from roll.launch.cli import main
from tests.conftest import roll_examples

ROLL_CONFIGS = roll_examples()
GEM_GAMES_FILE = ROLL_CONFIGS / "config" / "traj_envs_gem_games.yaml"
TRAIN = "roll.pipeline.agentic.agentic_pipeline.AgenticPipeline"
GEM_INSTALLED = importlib.util.find_spec("gem") is not None
# GEM's word games read NLTK's "words" corpus, which GEM downloads at construction (impossible offline)
NEEDS_NLTK_WORDS = {"Wordle", "Hangman"}
# the dry runs assert that Ray was never started, which only means something with Ray down
pytestmark = pytest.mark.usefixtures("no_ray")
# What each game's first observation must show, given the kwargs ROLL's file sets for it
FIRST_OBSERVATION = {
    "GuessTheNumber": ["Guess The Number", "between 1 and 20"],
    "Mastermind": ["Mastermind", "4 digit code", "from 1 to 6"],
    "Minesweeper": ["Minesweeper", " 7  .  .  .  .  .  .  .  ."],
    "FifteenPuzzle": ["from 1 to 8"],
    "Sudoku": ["Sudoku", "R9 "],
    "TowerofHanoi": ["4 disks", "A: [4, 3, 2, 1]"],
}


def nltk_words_present() -> bool:
    import nltk

    try:
        nltk.data.find("corpora/words")
        return True
    except LookupError:
        return False


def gem_game_tags() -> list[str]:
    return list(OmegaConf.load(GEM_GAMES_FILE).gem_games)


def offline_tags() -> list[str]:
    return [t for t in gem_game_tags() if t not in NEEDS_NLTK_WORDS or nltk_words_present()]


@pytest.fixture(autouse=True)
def tiny_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("ROLL_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "roll_cache"))


def write_gem_config(root: Path, train_tags: list[str], val_tags: list[str]) -> Path:
    """ROLL's frozen-lake config, edited as a ROLL user would, beside a symlink to ROLL's config folder."""
    (root / "config").symlink_to(ROLL_CONFIGS / "config", target_is_directory=True)
    config = OmegaConf.load(ROLL_CONFIGS / "qwen2.5-0.5B-agentic" / "agent_val_frozen_lake.yaml")
    assert list(config.defaults) == ["../config/traj_envs@_here_"], "ROLL's frozen-lake config changed its defaults"
    config.defaults = ["../config/traj_envs_gem_games@_here_"]
    for manager, tags in (("train_env_manager", train_tags), ("val_env_manager", val_tags)):
        config[manager].tags = tags
        config[manager].num_groups_partition = None  # ROLL: unset divides the groups equally
    config.custom_envs = {tag: f"${{gem_games.{tag}}}" for tag in sorted(set(train_tags + val_tags))}
    folder = root / "qwen2.5-0.5B-agentic"
    folder.mkdir()
    (folder / "agent_val_gem_games.yaml").write_text(OmegaConf.to_yaml(config))
    return folder


def dry_run_cpu(folder: Path, capsys) -> tuple[int, str, str]:
    argv = ["--config-path", str(folder), "--config-name", "agent_val_gem_games", "--dry-run", "--cpu",
            "pretrain=tiny-random-qwen2"]
    rc = main(argv, default_pipeline=TRAIN)
    assert not ray.is_initialized(), "the dry run started Ray"
    out = capsys.readouterr()
    return rc, out.out, out.err


def resolved_config(stdout: str) -> dict:
    body = stdout.split("# resolved config\n", 1)[1].split("\ndry run:", 1)[0]
    return yaml.safe_load(body)


def test_the_gem_games_file_is_there():
    assert GEM_GAMES_FILE.is_file(), f"ROLL's GEM games config is missing from {GEM_GAMES_FILE}"
    assert set(FIRST_OBSERVATION) | NEEDS_NLTK_WORDS == set(gem_game_tags())


def test_rolls_gem_games_config_validates_with_dry_run_cpu(tmp_path, capsys):
    tags = [t for t in gem_game_tags() if t in offline_tags()]
    rc, out, err = dry_run_cpu(write_gem_config(tmp_path, tags[:2], tags), capsys)
    if not GEM_INSTALLED:  # refused for the missing extra, with the install command, before any worker
        assert rc == 2 and "needs the optional GEM package" in err and "pip install" in err, err
        return
    assert rc == 0, err[-3000:]
    assert "unknown key" not in out + err
    assert "dry run: agent_val_gem_games is valid and this machine can run it (AgenticPipeline)" in out
    config = resolved_config(out)
    assert config["train_env_manager"]["tags"] == tags[:2]
    assert config["val_env_manager"]["tags"] == tags
    games = OmegaConf.to_container(OmegaConf.load(GEM_GAMES_FILE).gem_games)
    for tag in tags:
        env = config["custom_envs"][tag]
        assert env["env_type"] == games[tag]["env_type"] and env["env_type"] == f"game:{tag}-v0"
        assert env["env_config"]["max_turns"] == 10  # ${max_actions_per_traj} of the GEM file
        assert env["agent_template"] == "{observation}\n{suffix}\n"
    assert config["custom_envs"]["TowerofHanoi"]["env_config"]["num_disks"] == 4


@pytest.mark.skipif(not GEM_INSTALLED, reason="GEM is an optional dependency: pip install 'roll[gem]'")
@pytest.mark.skipif(nltk_words_present(), reason="NLTK's words corpus is installed here: the word games work")
def test_word_games_without_nltk_words_are_refused_before_any_worker(tmp_path, capsys):
    tags = gem_game_tags()
    rc, out, err = dry_run_cpu(write_gem_config(tmp_path, tags[:2], tags), capsys)
    assert rc == 2
    assert "Traceback" not in err
    assert ("custom_envs.Wordle (env_type 'game:Wordle-v0'): the env cannot be built on this machine: GEM env "
            "'game:Wordle-v0' needs NLTK's 'words' corpus, which is not on this machine") in err
    assert "python -m nltk.downloader words" in err and "NLTK_DATA" in err


@pytest.mark.skipif(not GEM_INSTALLED, reason="GEM is an optional dependency: pip install 'roll[gem]'")
@pytest.mark.parametrize("tag", sorted(FIRST_OBSERVATION) + sorted(NEEDS_NLTK_WORDS))
def test_each_gem_game_tag_builds_and_resets(tag):
    from roll.agentic.env import make_env

    spec = OmegaConf.to_container(OmegaConf.load(GEM_GAMES_FILE), resolve=True)["gem_games"][tag]
    if tag in NEEDS_NLTK_WORDS and not nltk_words_present():
        with pytest.raises(ValueError, match=f"GEM env 'game:{tag}-v0' needs NLTK's 'words' corpus"):
            make_env(spec["env_type"], **spec["env_config"])
        return
    env = make_env(spec["env_type"], **spec["env_config"])
    observation, info = env.reset(seed=3)
    for expected in FIRST_OBSERVATION.get(tag, [tag]):
        assert expected in observation, (expected, observation)
    assert observation == env.reset(seed=3)[0]
