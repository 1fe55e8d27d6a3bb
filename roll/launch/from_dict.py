"""Turn plain dicts (from YAML, after Hydra) into typed config dataclasses, checking as we go.

Unknown keys are errors with the closest valid key suggested, except ROLL's keys that roll does not
implement (the one table in roll/launch/roll_keys.py): those produce one warning, or are refused for a value roll cannot honour. `~` for a template is its default.
Values are checked against the field's type annotation; ints are accepted where floats are expected.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Union

from roll.configs.errors import ConfigError, did_you_mean
from roll.launch.roll_keys import keys_for


def from_dict(cls: type, data: Any, path: str, warnings: list[str]) -> Any:
    """Builds dataclass `cls` from `data`; `path` names the place in the config for messages;
    warnings about keys without effect are appended to `warnings`."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of keys for {cls.__name__}, got {type(data).__name__} {data!r}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    roll_keys = keys_for(cls)
    aliases: dict[str, str] = getattr(cls, "ALIASES", {})
    kwargs = {}
    for key, value in data.items():
        key_path = f"{path}.{key}" if path else str(key)
        if key in aliases:
            if aliases[key] in data:
                raise ConfigError(f"{key_path}: {key!r} is another name for {aliases[key]!r}; give only one of them")
            key = aliases[key]
        if key in fields:
            if value is None and str(key).endswith("template") and _has_default(fields[key]):
                continue  # ROLL's configs write `~` for "the default template"
            kwargs[key] = convert(hints[key], value, key_path, warnings)
        elif key in roll_keys:
            entry = roll_keys[key]
            if entry.inert is not None and not entry.inert(value):
                shown = "this value" if isinstance(value, (dict, list)) else repr(value)
                raise ConfigError(f"{key_path}: {shown} is not supported: {entry.refusal}.")
            warnings.append(f"{key_path} has no effect in roll ({entry.reason}); it is ignored.")
        else:
            raise ConfigError(f"{key_path}: unknown key (neither roll nor ROLL defines it).{did_you_mean(str(key), [*fields, *roll_keys])} Valid keys here: {', '.join(sorted(fields))}.")
    return cls(**kwargs)


def _has_default(f: dataclasses.Field) -> bool:
    return f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING


def convert(annotation: Any, value: Any, path: str, warnings: list[str]) -> Any:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is Any:
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for option in (a for a in args if a is not type(None)):
            try:
                return convert(option, value, path, warnings)
            except ConfigError as error:
                errors.append(str(error))
        if value is None:
            raise ConfigError(f"{path}: a value is required, got null")
        raise ConfigError(errors[0] if len(errors) == 1 else f"{path}: {value!r} fits none of the allowed types ({'; '.join(errors)})")
    if dataclasses.is_dataclass(annotation):
        return from_dict(annotation, value, path, warnings)
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{path}: expected a list, got {type(value).__name__} {value!r}")
        item_type = args[0] if args else Any
        return [convert(item_type, v, f"{path}[{i}]", warnings) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: expected a mapping, got {type(value).__name__} {value!r}")
        value_type = args[1] if len(args) == 2 else Any
        return {k: convert(value_type, v, f"{path}.{k}", warnings) for k, v in value.items()}
    if annotation is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{path}: expected true or false, got {value!r}")
    if annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ConfigError(f"{path}: expected an integer, got {value!r}")
    if annotation is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:  # YAML 1.1 reads "1e-6" (no dot) as a string; accept it as users mean it
                return float(value)
            except ValueError:
                pass
        raise ConfigError(f"{path}: expected a number, got {value!r}")
    if annotation is str:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        raise ConfigError(f"{path}: expected a string, got {type(value).__name__} {value!r}")
    return value
