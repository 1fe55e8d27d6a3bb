"""``env_type`` name -> (env class, config dataclass), and config building with clear errors."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from typing import Any, Callable, Optional, TypeVar, Union

from roll.agentic.env.base import BaseEnv, BaseEnvConfig

_REGISTRY: dict[str, type[BaseEnv]] = {}
EnvT = TypeVar("EnvT", bound=type[BaseEnv])


def register_env(
    env_type: str, env_cls: Optional[EnvT] = None, *, overwrite: bool = False
) -> Union[EnvT, Callable[[EnvT], EnvT]]:
    """Register ``env_cls`` (whose ``config_cls`` is its config dataclass) under ``env_type``.

    ``register_env("my_env", MyEnv)``, or as a decorator: ``@register_env("my_env")``.
    """
    if env_cls is None:
        return lambda cls: register_env(env_type, cls, overwrite=overwrite)
    if not isinstance(env_type, str) or not env_type:
        raise ValueError(f"env_type must be a non-empty string, got {env_type!r}")
    if not (isinstance(env_cls, type) and issubclass(env_cls, BaseEnv)):
        raise TypeError(f"register_env({env_type!r}, ...) needs a BaseEnv subclass, got {env_cls!r}")
    config_cls = env_cls.config_cls
    if not (dataclasses.is_dataclass(config_cls) and issubclass(config_cls, BaseEnvConfig)):
        raise TypeError(f"{env_cls.__name__}.config_cls must be a BaseEnvConfig dataclass, got {config_cls!r}")
    existing = _REGISTRY.get(env_type)
    if existing is not None and existing is not env_cls and not overwrite:
        raise ValueError(
            f"env_type {env_type!r} is already registered to {existing.__module__}.{existing.__name__}; "
            "pass overwrite=True to replace it"
        )
    _REGISTRY[env_type] = env_cls
    return env_cls


def list_env_types() -> list[str]:
    return sorted(_REGISTRY)


def get_env_cls(env_type: str) -> type[BaseEnv]:
    try:
        return _REGISTRY[env_type]
    except (KeyError, TypeError):
        close = difflib.get_close_matches(str(env_type), list(_REGISTRY), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(
            f"unknown env_type {env_type!r}{hint} Registered env types: {', '.join(list_env_types())}"
        ) from None


def get_env_config_cls(env_type: str) -> type[BaseEnvConfig]:
    """The config dataclass whose fields are the valid ``env_config`` keys of ``env_type``."""
    return get_env_cls(env_type).config_cls


def _plain(value: Any) -> Any:
    """OmegaConf containers (and tuples) -> plain dicts/lists, so configs hold ordinary values."""
    if isinstance(value, Mapping) or (hasattr(value, "items") and hasattr(value, "keys")):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ListConfig":
        return [_plain(item) for item in value]
    return value


def build_config(config_cls: type[BaseEnvConfig], env_config: Mapping[str, Any], env_type: str) -> BaseEnvConfig:
    """Instantiate ``config_cls`` from YAML-like values; a key that is not a field is an error that
    names it, the env type and the closest valid key."""
    valid = [f.name for f in dataclasses.fields(config_cls) if f.init]
    values = _plain(env_config or {})
    if not isinstance(values, dict):
        raise TypeError(f"env_config for env_type {env_type!r} must be a mapping, got {type(env_config).__name__}")
    for key in values:
        if key not in valid:
            close = difflib.get_close_matches(str(key), valid, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ValueError(
                f"unknown env_config key {key!r} for env_type {env_type!r}.{hint} "
                f"Valid keys ({config_cls.__name__}): {', '.join(sorted(valid))}"
            )
    try:
        return config_cls(**values)
    except ValueError as exc:
        raise ValueError(f"env_type {env_type!r}: {exc}") from None


def make_env_config(env_type: str, **env_config: Any) -> BaseEnvConfig:
    """Validate ``env_config`` for ``env_type`` and return the config dataclass instance."""
    return build_config(get_env_config_cls(env_type), env_config, env_type)


def make_env(env_type: str, **env_config: Any) -> BaseEnv:
    """Build a registered env from its ``env_config`` keys."""
    env_cls = get_env_cls(env_type)
    return env_cls(build_config(env_cls.config_cls, env_config, env_type))
