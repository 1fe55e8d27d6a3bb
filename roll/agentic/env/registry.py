"""``env_type`` -> (env class, config dataclass), and config building with clear errors.

An ``env_type`` is a name registered with ``register_env``, a name an env resolver knows (a family of
names too large or too dynamic to list, such as GEM's registry: ``register_env_resolver``), or the
class path of a BaseEnv subclass (``my_pkg.envs.MyEnv``) in a module on PYTHONPATH. A class path needs no registration, so it works
the same in the driver and in every Ray env worker (each worker imports the module itself).
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any, Callable, Optional, TypeVar, Union

from hydra.utils import get_class

from roll.agentic.env.base import BaseEnv, BaseEnvConfig
from roll.agentic.env.roll_env_types import ROLL_ENV_NEEDS

_REGISTRY: dict[str, type[BaseEnv]] = {}
# name -> env class, or None where the name is not the resolver's; ValueError for one of its names it refuses
EnvResolver = Callable[[str], Optional[type[BaseEnv]]]
_RESOLVERS: list[EnvResolver] = []
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
    _check_env_class(env_cls, f"register_env({env_type!r}, ...)")
    existing = _REGISTRY.get(env_type)
    if existing is not None and existing is not env_cls and not overwrite:
        raise ValueError(
            f"env_type {env_type!r} is already registered to {existing.__module__}.{existing.__name__}; "
            "pass overwrite=True to replace it"
        )
    _REGISTRY[env_type] = env_cls
    return env_cls


def register_env_resolver(resolver: EnvResolver) -> EnvResolver:
    """Add a resolver, asked (in order of registration) about names that are not registered."""
    if resolver not in _RESOLVERS:
        _RESOLVERS.append(resolver)
    return resolver


def list_env_types() -> list[str]:
    return sorted(_REGISTRY)


def _check_env_class(env_cls: Any, what: str) -> None:
    if not (isinstance(env_cls, type) and issubclass(env_cls, BaseEnv)):
        raise TypeError(f"{what} needs a BaseEnv subclass, got {env_cls!r}")
    config_cls = env_cls.config_cls
    if not (dataclasses.is_dataclass(config_cls) and issubclass(config_cls, BaseEnvConfig)):
        raise TypeError(f"{env_cls.__name__}.config_cls must be a BaseEnvConfig dataclass, got {config_cls!r}")


def get_env_cls(env_type: str) -> type[BaseEnv]:
    """The env class of a registered name, or of a class path (imported here)."""
    if isinstance(env_type, str) and env_type in _REGISTRY:
        return _REGISTRY[env_type]
    for resolver in _RESOLVERS if isinstance(env_type, str) else ():
        env_cls = resolver(env_type)
        if env_cls is not None:
            _check_env_class(env_cls, f"env_type {env_type!r}")
            return env_cls
    if isinstance(env_type, str) and "." in env_type:
        try:
            env_cls = get_class(env_type)
        except (ImportError, ValueError) as exc:
            lines = str(exc).splitlines()  # hydra's: "Error loading 'x':", then the cause, then a hint
            raise ValueError(f"env_type {env_type!r} is not a registered name and its class path does not import: "
                             f"{' '.join(lines[1:] or lines)} Is its module on PYTHONPATH?") from None
        _check_env_class(env_cls, f"env_type {env_type!r}")
        return env_cls
    if env_type in ROLL_ENV_NEEDS:
        raise ValueError(f"env_type {env_type!r} is ROLL's, and roll does not run it: it needs {ROLL_ENV_NEEDS[env_type]} "
                         "(docs/configuration.md lists ROLL's env types and what each needs)")
    close = difflib.get_close_matches(str(env_type), list(_REGISTRY), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ValueError(
        f"unknown env_type {env_type!r}{hint} Registered env types: {', '.join(list_env_types())}; any GEM env "
        f"id (game:*, rg:*, math:*, qa:*, code:*...); or register your own with "
        f"roll.agentic.env.register_env({env_type!r}, YourEnv), or give the class path of a BaseEnv subclass "
        "(my_pkg.envs.MyEnv) as env_type (docs/environments.md)"
    )


def get_env_config_cls(env_type: str) -> type[BaseEnvConfig]:
    """The config dataclass whose fields are the valid ``env_config`` keys of ``env_type``."""
    return get_env_cls(env_type).config_cls


def make_env_config(env_type: str, **env_config: Any) -> BaseEnvConfig:
    """Validate ``env_config`` for ``env_type`` and return the config dataclass instance."""
    return get_env_config_cls(env_type).from_values(env_config, env_type)


def make_env(env_type: str, **env_config: Any) -> BaseEnv:
    """Build the env of a registered name or class path from its ``env_config`` keys."""
    env_cls = get_env_cls(env_type)
    return env_cls(env_cls.config_cls.from_values(env_config, env_type))
