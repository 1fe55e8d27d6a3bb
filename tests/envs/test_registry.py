"""Registry: env_type -> env class + config dataclass, make_env, and config validation."""

import dataclasses
import random

import pytest

from roll.agentic.env import (
    BaseEnv,
    BaseEnvConfig,
    StepOutcome,
    get_env_config_cls,
    list_env_types,
    make_env,
    register_env,
)
from roll.agentic.env.frozen_lake.config import FrozenLakeEnvConfig
from roll.agentic.env.frozen_lake.env import FrozenLakeEnv
from roll.agentic.env.sokoban.config import SokobanEnvConfig
from roll.agentic.env.sokoban.env import SokobanEnv


def test_bundled_envs_are_registered_with_their_config_classes():
    assert {"frozen_lake", "sokoban", "countdown", "guess_number"} <= set(list_env_types())
    assert get_env_config_cls("frozen_lake") is FrozenLakeEnvConfig
    assert get_env_config_cls("sokoban") is SokobanEnvConfig
    assert isinstance(make_env("sokoban"), SokobanEnv)
    assert isinstance(make_env("frozen_lake"), FrozenLakeEnv)


def test_unknown_key_names_key_env_type_and_closest_valid_key():
    with pytest.raises(ValueError) as err:
        make_env("sokoban", num_boxs=2)
    message = str(err.value)
    assert "'num_boxs'" in message and "'sokoban'" in message and "Did you mean 'num_boxes'" in message


def test_unknown_env_type_suggests_the_closest():
    with pytest.raises(ValueError, match="did you mean 'sokoban'"):
        make_env("sokobn")


@pytest.mark.parametrize(
    "env_type, bad, key",
    [
        ("frozen_lake", {"p": 1.5}, "p"),
        ("frozen_lake", {"size": "4"}, "size"),
        ("sokoban", {"dim_room": [6]}, "dim_room"),
        ("sokoban", {"grid_lookup": {0: "#", 1: "_"}}, "grid_lookup"),
        ("sokoban", {"grid_vocab": {"?": "mystery"}}, "grid_vocab"),
        ("sokoban", {"max_steps": 0}, "max_steps"),
        ("countdown", {"num_numbers": 9}, "num_numbers"),
        ("guess_number", {"min_value": 5, "max_value": 5}, "max_value"),
    ],
)
def test_bad_values_name_the_field(env_type, bad, key):
    with pytest.raises(ValueError, match=rf"env_config\.{key}\b"):
        make_env(env_type, **bad)


# ROLL's traj_envs.yaml and its FrozenLake example: every key they set must be a config field.
ROLL_KEYS = {
    "frozen_lake": ["action_pattern", "max_steps", "format_penalty", "is_slippery", "env_instruction"],
    "sokoban": ["action_pattern", "max_steps", "format_penalty", "dim_room", "num_boxes", "search_depth",
                "grid_lookup", "grid_vocab"],
}


@pytest.mark.parametrize("env_type", sorted(ROLL_KEYS))
def test_every_key_rolls_configs_use_is_a_field(env_type):
    fields = {f.name for f in dataclasses.fields(get_env_config_cls(env_type))}
    assert set(ROLL_KEYS[env_type]) <= fields


@dataclasses.dataclass
class CoinConfig(BaseEnvConfig):
    sides: int = 2


class CoinEnv(BaseEnv):
    """The few lines a user writes for a new env (see docs/environments.md)."""

    config_cls = CoinConfig

    def _reset(self, rng: random.Random) -> None:
        self.coin, self.called = rng.choice(["Heads", "Tails"]), None

    def action_names(self) -> list[str]:
        return ["Heads", "Tails"]

    def _apply(self, action: str) -> StepOutcome:
        self.called = action
        return StepOutcome(reward=float(action == self.coin), terminated=True, effective=True)

    def render(self) -> str:
        return "Call the coin." if self.called is None else f"It was {self.coin}."

    def is_success(self) -> bool:
        return self.called == self.coin

    def default_instruction(self) -> str:
        return "Guess how the coin landed."


def test_a_new_env_takes_a_class_and_one_line():
    register_env("test_coin", CoinEnv, overwrite=True)
    env = make_env("test_coin", format_penalty=-0.5)
    obs, info = env.reset(seed=3)
    assert obs == "Call the coin." and "Heads, Tails" in info["env_instruction"]
    _, reward, terminated, _, info = env.step("<answer>heads</answer>")
    assert terminated and reward == float(env.coin == "Heads") and info["action"] == "Heads"
    env.reset(seed=3)
    assert env.step("heads")[1] == -0.5  # no tags: format penalty


def test_registering_a_second_class_under_a_taken_name_is_refused():
    with pytest.raises(ValueError, match="already registered"):
        register_env("sokoban", CoinEnv)
    with pytest.raises(TypeError, match="BaseEnv subclass"):
        register_env("not_an_env", dict)


def test_step_before_reset_and_after_the_end_are_clear_errors():
    env = make_env("countdown")
    with pytest.raises(RuntimeError, match="before reset"):
        env.step("<answer>1</answer>")
    env.reset(seed=0)
    env.step("<answer>1 + 1</answer>")  # a well-formed answer ends the single-turn episode
    with pytest.raises(RuntimeError, match="after the episode ended"):
        env.step("<answer>1 + 1</answer>")


def test_config_object_and_kwargs_are_exclusive():
    with pytest.raises(TypeError, match="either a config"):
        FrozenLakeEnv(FrozenLakeEnvConfig(), size=5)
    assert FrozenLakeEnv(size=5).config.size == 5


def test_reset_accepts_numpy_integers_as_the_same_seed_and_refuses_other_types():
    np = pytest.importorskip("numpy")
    env = make_env("sokoban")
    assert env.reset(seed=np.int64(17))[0] == env.reset(seed=17)[0]
    with pytest.raises(TypeError, match="needs an int"):
        env.reset(seed="17")


def test_make_env_config_validates_values_for_a_config_checker():
    from roll.agentic.env import make_env_config

    assert make_env_config("sokoban", dim_x=5, dim_y=7).dim_room == (5, 7)
    with pytest.raises(ValueError, match=r"env_type 'sokoban': env_config\.dim_x"):
        make_env_config("sokoban", dim_x=5)
