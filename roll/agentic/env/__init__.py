"""Text environments for agentic RL: the contract, the registry and the bundled envs.

Bundled ``env_type`` names: ``frozen_lake``, ``sokoban``, ``countdown``, ``guess_number``, ``tool_use``, ``gem`` and ``textworld``
(these two need their optional packages), ``sokoban_native_env``, ``sokoban_sandbox``, ``roll_math``, ``roll_qa`` and ``roll_code`` (local data files),
and every env id GEM registers (``game:*``, ``rg:*``, ``math:*``...).
"""

from roll.agentic.env.base import BaseEnv, BaseEnvConfig, StepOutcome
from roll.agentic.env.registry import (
    get_env_cls,
    get_env_config_cls,
    list_env_types,
    make_env,
    make_env_config,
    register_env,
    register_env_resolver,
)
from roll.agentic.env.countdown.env import CountdownEnv
from roll.agentic.env.frozen_lake.env import FrozenLakeEnv
from roll.agentic.env.gem.env import GemEnv
from roll.agentic.env.dataset_task.env import CodeTaskEnv, MathTaskEnv, QaTaskEnv
from roll.agentic.env.gem.gem_types import resolve_gem_env_type
from roll.agentic.env.guess_number.env import GuessNumberEnv
from roll.agentic.env.sokoban.env import SokobanEnv
from roll.agentic.env.sokoban.native_env import SokobanNativeEnv
from roll.agentic.env.sokoban.sandbox_env import SokobanSandboxEnv
from roll.agentic.env.textworld.env import TextWorldEnv
from roll.agentic.env.tool_use.env import ToolUseEnv

register_env("frozen_lake", FrozenLakeEnv)
register_env("sokoban", SokobanEnv)
register_env("sokoban_native_env", SokobanNativeEnv)  # ROLL's agent-native form: the env keeps the chat
register_env("sokoban_sandbox", SokobanSandboxEnv)  # ROLL's sandboxed form: the game in a sandboxed process
register_env("countdown", CountdownEnv)
register_env("guess_number", GuessNumberEnv)
register_env("tool_use", ToolUseEnv)
register_env("gem", GemEnv)  # imports GEM only when an env is built
register_env("textworld", TextWorldEnv)  # likewise textworld
register_env("roll_math", MathTaskEnv)  # ROLL's GEM-registered dataset envs, on local data files
register_env("roll_qa", QaTaskEnv)
register_env("roll_code", CodeTaskEnv)
register_env_resolver(resolve_gem_env_type)  # every GEM id: game:*, rg:*, math:*, ...

__all__ = [
    "BaseEnv",
    "BaseEnvConfig",
    "StepOutcome",
    "CountdownEnv",
    "FrozenLakeEnv",
    "GemEnv",
    "GuessNumberEnv",
    "SokobanEnv",
    "TextWorldEnv",
    "ToolUseEnv",
    "get_env_cls",
    "get_env_config_cls",
    "list_env_types",
    "make_env",
    "make_env_config",
    "register_env",
    "register_env_resolver",
]
