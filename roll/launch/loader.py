"""Load a YAML config through Hydra into a validated config dataclass.

`load_agentic_config("examples/smollm2-135M-agentic_cpu", "agent_val_frozen_lake", ["seed=123"])` composes
the YAML (its `defaults:` list and `${…}` interpolations included), applies command-line overrides,
turns the result into the schema's dataclasses (roll/configs/; unknown keys are errors with a
suggestion) and validates it (roll/launch/validation.py). This is the top layer: it may import every
layer below to check a config, and nothing below imports it.
"""

from __future__ import annotations

import copy
import difflib
import logging
import re
import warnings as py_warnings
from pathlib import Path
from typing import Any, Callable, Sequence

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from roll.configs.agentic_config import AgenticConfig
from roll.configs.device_mapping import parse_device_mapping
from roll.configs.errors import ConfigError
from roll.launch.from_dict import from_dict
from roll.launch.roll_keys import keys_for
from roll.launch.validation import validate

logger = logging.getLogger("roll.config")
REPO_ROOT = Path(__file__).resolve().parents[2]
_INTERPOLATION_ROOT = re.compile(r"\$\{\s*([A-Za-z_][\w]*)")
ROLES = ("actor_train", "actor_infer", "critic", "reference")
TYPO_CUTOFF = 0.8  # difflib ratio above which an unknown top-level name is taken for a misspelt key


def resolve_config_dir(config_path: str | Path) -> Path:
    """The config folder: absolute, or relative to the current folder, the repo root or examples/."""
    path = Path(config_path)
    candidates = [path] if path.is_absolute() else [Path.cwd() / path, REPO_ROOT / path, REPO_ROOT / "examples" / path]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate.resolve()
    tried = ", ".join(str(c) for c in candidates)
    raise ConfigError(f"--config-path {config_path!r}: no such folder (looked in {tried}).")


def compose_raw(config_dir: Path, config_name: str, overrides: Sequence[str] = ()) -> Any:
    """Hydra-composed config (a DictConfig, interpolations not yet resolved)."""
    config_name = config_name.removesuffix(".yaml")
    if not (config_dir / f"{config_name}.yaml").is_file():
        available = sorted(p.stem for p in config_dir.glob("*.yaml"))
        raise ConfigError(f"--config-name {config_name!r}: no {config_name}.yaml in {config_dir} (found: {', '.join(available) or 'none'}).")
    GlobalHydra.instance().clear()
    try:
        # ROLL's configs omit `_self_` from their defaults list; Hydra then applies the file last, which
        # is what they mean, so its upgrade warning would only be noise.
        py_warnings.filterwarnings("ignore", message=".*Defaults list is missing `_self_`", category=UserWarning)
        with initialize_config_dir(config_dir=str(config_dir), version_base=None):
            base = compose(config_name=config_name)
            # Hydra only overrides keys the YAML already has; a key that our schema knows but the YAML
            # leaves out is added (`++`), so `critic_warmup=2` works whether or not the file sets it.
            adjusted = [_force_add_if_missing(base, o) for o in overrides]
            return compose(config_name=config_name, overrides=adjusted) if overrides else base
    except OmegaConfBaseException as error:
        raise ConfigError(f"{config_dir / config_name}.yaml: {error}") from error
    except Exception as error:  # Hydra's own errors (bad override syntax, missing defaults file)
        if type(error).__module__.startswith("hydra"):
            raise ConfigError(f"{config_dir / config_name}.yaml: {error}") from error
        raise
    finally:
        GlobalHydra.instance().clear()


def _force_add_if_missing(base: Any, override: str) -> str:
    if override[:1] in "+~" or "=" not in override:
        return override
    key = override.split("=", 1)[0]
    return override if OmegaConf.select(base, key, default=_MISSING) is not _MISSING else "++" + override


_MISSING = object()


def load_config(config_path: str | Path, config_name: str, overrides: Sequence[str] = (), *, config_cls: type,
                rollout_only: bool = False, adjust: Callable[[Any], None] | None = None,
                adjust_data: Callable[[dict], None] | None = None):
    """Compose, convert to `config_cls` and validate; raises ConfigError (naming the file and key) on any problem.
    `rollout_only`: the config is for the rollout pipeline, which needs no actor_train block.
    `adjust(config)`: changes the typed config before validation (the launchers' --cpu);
    `adjust_data(data)`: changes the YAML's resolved data before it becomes a config (--cpu's keys
    whose other values are refused on the way)."""
    config_dir = resolve_config_dir(config_path)
    raw = compose_raw(config_dir, config_name, overrides)
    source = f"{config_dir / config_name.removesuffix('.yaml')}.yaml"
    try:
        return config_from_dictconfig(raw, config_cls, rollout_only=rollout_only, adjust=adjust, adjust_data=adjust_data)
    except ConfigError as error:
        raise ConfigError(f"{source}: {error}") from None


def load_agentic_config(config_path: str | Path, config_name: str, overrides: Sequence[str] = (), **options: Any) -> AgenticConfig:
    """The validated AgenticConfig of `config_name`.yaml in `config_path`, with Hydra `overrides` applied;
    `options`: load_config's `rollout_only`, `adjust` and `adjust_data` (the launchers' --cpu)."""
    return load_config(config_path, config_name, overrides, config_cls=AgenticConfig, **options)


def config_from_dictconfig(raw: Any, config_cls: type, *, rollout_only: bool = False,
                           adjust: Callable[[Any], None] | None = None, adjust_data: Callable[[dict], None] | None = None):
    """DictConfig → validated `config_cls`, with warnings for keys that have no effect in roll."""
    referenced = set(_INTERPOLATION_ROOT.findall(OmegaConf.to_yaml(raw)))
    try:
        data = OmegaConf.to_container(raw, resolve=True)
    except OmegaConfBaseException as error:
        raise ConfigError(f"cannot resolve an interpolation: {error}") from error
    data.pop("hydra", None)
    yaml_variables = getattr(config_cls, "ROLL_YAML_VARIABLES", frozenset()) | referenced
    schema_keys = set(config_cls.__dataclass_fields__)
    for key in [k for k in data if k not in schema_keys and k in yaml_variables]:
        data.pop(key)
    _drop_unused_variables(data, config_cls)
    _fill_rollout_only(data, rollout_only)
    if adjust_data is not None:
        adjust_data(data)
    for role in ROLES:
        block = data.get(role)
        if isinstance(block, dict) and "device_mapping" in block:
            try:
                block["device_mapping"] = parse_device_mapping(block["device_mapping"], f"{role}.device_mapping")
            except ValueError as error:
                raise ConfigError(str(error)) from None
    warnings: list[str] = []
    config = from_dict(config_cls, data, "", warnings)
    _log_once(warnings)
    if adjust is not None:
        adjust(config)
    _val_falls_back_to_train(config)
    validate(config)
    return config


def _drop_unused_variables(data: dict[str, Any], config_cls: type) -> None:
    """ROLL's loader ignores top-level YAML names that are no setting (`model_name`, `gem_games`, …),
    so roll accepts them and lists them once. A near-copy of a real key (`seeed`, `max_step`) stays,
    to fail as a typo with the key suggested."""
    known = set(config_cls.__dataclass_fields__) | set(keys_for(config_cls))
    unused = [k for k in data if k not in known and not difflib.get_close_matches(str(k), known, n=1, cutoff=TYPO_CUTOFF)]
    for key in unused:
        data.pop(key)
    if unused:
        logger.info("top-level YAML variables that are no setting (ignored, as ROLL does): %s", ", ".join(map(str, unused)))


def _fill_rollout_only(data: dict[str, Any], rollout_only: bool) -> None:
    """A rollout-only ROLL config has no actor_train block: fine for the rollout pipeline, not for training."""
    if "actor_train" in data:
        return
    if not rollout_only:
        raise ConfigError(
            "actor_train: the config has no actor_train block, so it is a rollout-only config. Run it with "
            "examples/start_agentic_rollout_pipeline.py, or add an actor_train block to train."
        )
    data["actor_train"] = {"strategy_args": {"strategy_name": "hf_train"}}  # never started by the rollout pipeline


def _val_falls_back_to_train(config: Any) -> None:
    """An empty val_env_manager.tags means: validate on the train envs (as the rollout pipeline does)."""
    if not config.val_env_manager.tags and config.train_env_manager.tags:
        config.val_env_manager = copy.deepcopy(config.train_env_manager)
        logger.info("val_env_manager.tags is empty: validation uses the train envs (train_env_manager)")


def _log_once(warnings: list[str]) -> None:
    """One line per key that has no effect, however many blocks repeat it."""
    seen = set()
    for message in warnings:
        key = re.sub(r"^.*?([\w]+) has no effect", r"\1", message)
        if key not in seen:
            seen.add(key)
            logger.warning(message)
