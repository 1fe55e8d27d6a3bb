"""Every env id GEM registers is an ``env_type`` (``game:Sudoku-v0-easy``, ``rg:<any reasoning-gym
task>``, ``math:GSM8K``, ``qa:HotpotQA``, ``code:CodeContest``...), and so is ROLL's ``game:<Name>-v0``
form (GEM 0.0.4 ids: the game's class with its own defaults), with the GEM env's keyword arguments
straight in ``env_config`` as ROLL's configs write them.

- GEM's games and reasoning-gym tasks: a GemEnv (env.py) whose config has the env's ``__init__``
  keyword arguments as fields (a misspelt key is an error naming the closest), None meaning the id's
  registered value or the class default.
- GEM's dataset envs (its math, QA/logic and code entry points): roll's dataset tasks on a local file
  (dataset_task/), with GEM's registered ``dataset_name``, ``split`` and columns as defaults, so that
  an id whose data is not local is refused naming the dataset and how to point at a local copy.
- Entry points that need something this adapter cannot give (images, a missing package) are refused
  with the reason.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import inspect
from functools import lru_cache
from typing import Any, Optional

from roll.agentic.env.base import BaseEnv, config_error
from roll.agentic.env.dataset_task.env import CodeTaskEnv, DatasetTaskEnv, MathTaskEnv, QaTaskEnv
from roll.agentic.env.gem.config import GemEnvConfig
from roll.agentic.env.gem.env import INSTALL_HINT, GemEnv

# GEM entry-point modules whose envs read a Hugging Face dataset -> roll's task on a local file
DATASET_FAMILIES: dict[str, type[DatasetTaskEnv]] = {
    "gem.envs.math_env": MathTaskEnv,
    "gem.envs.qa_env": QaTaskEnv,
    "gem.envs.code_env": CodeTaskEnv,
}
REFUSED_FAMILIES = {
    "gem.envs.math_visual_env": "a vision-language model and image observations (its questions are pictures); "
                                "roll's GEM adapter is text-only",
}
# ids of gem-llm 0.1.0 that cannot run as registered, whatever roll does
BROKEN_IDS = {
    "game:FifteenPuzzle-v0-random": "GEM 0.1.0 cannot build it (its random variant squares num_rows while it is "
                                    "None); use game:FifteenPuzzle-v0-easy or -hard, or game:FifteenPuzzle-v0 with num_rows",
    "rg:composite": "reasoning-gym's composite task needs the list of tasks it mixes, which GEM's reasoning-gym env "
                    "cannot pass on; use the tasks themselves (rg:<task>)",
}
# prefixes of GEM's id families: an unknown id with one is an error naming the closest GEM id
GEM_PREFIXES = ("game:", "rg:", "math:", "code:", "qa:", "logic:", "eval:")


def _gem_registry() -> Optional[dict[str, Any]]:
    try:
        from gem.envs.registration import ENV_REGISTRY  # optional dependency
    except ImportError:
        return None
    return ENV_REGISTRY


def _entry(gem_id: str, registry: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(entry point, registered kwargs) of a GEM id, or of ROLL's ``game:<Name>-v0`` form (its first
    variant's class, without a difficulty's kwargs)."""
    if gem_id in registry:
        return registry[gem_id].entry_point, dict(registry[gem_id].kwargs)
    variants = sorted(name for name in registry if name.startswith(gem_id + "-"))
    if variants:
        return registry[variants[0]].entry_point, {}
    close = difflib.get_close_matches(gem_id, list(registry), n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"env_type {gem_id!r} is not a GEM env id.{hint} GEM registers {len(registry)} ids "
                     "(game:*, rg:<reasoning-gym task>, math:*, qa:*, logic:*, code:*, eval:*): see docs/environments.md")


def _import_entry_point(gem_id: str, entry_point: str) -> type:
    module_name, class_name = entry_point.split(":")
    try:
        return getattr(importlib.import_module(module_name), class_name)
    except ImportError as exc:
        raise ValueError(f"GEM env {gem_id!r} needs the Python package {exc.name!r}, which is not installed "
                         f"(pip install {exc.name})") from None


def _class_name(gem_id: str, suffix: str) -> str:
    return "Gem" + "".join(ch for ch in gem_id.title() if ch.isalnum()) + suffix


def _gem_game_class(gem_id: str, game_cls: type) -> type[GemEnv]:
    base_fields = {f.name for f in dataclasses.fields(GemEnvConfig)}
    params = [name for name, p in inspect.signature(game_cls.__init__).parameters.items()
              if name != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and name not in base_fields]

    def __post_init__(self: Any) -> None:
        if self.gem_id != gem_id:
            raise config_error("gem_id", f"env_type {gem_id!r} fixes gem_id; use env_type 'gem' to choose another")
        self.gem_kwargs = {**self.gem_kwargs, **{name: getattr(self, name) for name in params if getattr(self, name) is not None}}
        GemEnvConfig.__post_init__(self)

    fields = [("gem_id", str, dataclasses.field(default=gem_id))]
    fields += [(name, Optional[Any], dataclasses.field(default=None)) for name in params]
    config_cls = dataclasses.make_dataclass(_class_name(gem_id, "Config"), fields, bases=(GemEnvConfig,), namespace={
        "__post_init__": __post_init__,
        "__doc__": f"env_type {gem_id!r}: GEM keyword arguments {', '.join(params)} (None: GEM's registered value).",
    })
    return type(_class_name(gem_id, "Env"), (GemEnv,), {"config_cls": config_cls})


def _dataset_task_class(gem_id: str, task_cls: type[DatasetTaskEnv], registered: dict[str, Any]) -> type[DatasetTaskEnv]:
    """The task env with GEM's registered dataset and columns as its config defaults."""
    config_cls = task_cls.config_cls
    names = {f.name for f in dataclasses.fields(config_cls)}
    defaults = [(key, type(value) if value is not None else Optional[str], dataclasses.field(default=value))
                for key, value in registered.items() if key in names]
    new_config = dataclasses.make_dataclass(_class_name(gem_id, "Config"), defaults, bases=(config_cls,), namespace={
        "__doc__": f"env_type {gem_id!r}: {task_cls.__name__} on a local copy of {registered.get('dataset_name')!r}.",
    })
    return type(_class_name(gem_id, "Env"), (task_cls,), {"config_cls": new_config})


@lru_cache(maxsize=None)
def resolve_gem_env_type(env_type: str) -> Optional[type[BaseEnv]]:
    """The env class of an id GEM registers (None for other names); ValueError for an id roll refuses,
    or one with a GEM prefix (game:, rg:, ...) that GEM does not register, with the reason."""
    if ":" not in env_type:
        return None
    registry = _gem_registry()
    gem_like = env_type.startswith(GEM_PREFIXES)
    if registry is None:
        if gem_like:
            raise ValueError(f"env_type {env_type!r} is a GEM env id, and GEM is not installed: {INSTALL_HINT}")
        return None
    known = env_type in registry or any(name.startswith(env_type + "-") for name in registry)
    if not known and not gem_like:
        return None
    if env_type in BROKEN_IDS:
        raise ValueError(f"GEM env {env_type!r} is refused: {BROKEN_IDS[env_type]}")
    entry_point, registered = _entry(env_type, registry)
    module = entry_point.split(":")[0]
    if module in DATASET_FAMILIES:
        return _dataset_task_class(env_type, DATASET_FAMILIES[module], registered)
    if module in REFUSED_FAMILIES:
        raise ValueError(f"GEM env {env_type!r} is refused: it needs {REFUSED_FAMILIES[module]}")
    return _gem_game_class(env_type, _import_entry_point(env_type, entry_point))


def gem_env_ids() -> list[str]:
    """Every id GEM registers here (empty without GEM)."""
    return sorted(_gem_registry() or {})

