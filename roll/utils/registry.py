"""One small name → object table, used by every extension point that a config key selects.

Each extension point keeps its own `Registry` next to the code it extends (advantage estimators in
roll/algorithms/advantages.py, KL estimators in kl.py, …) and exposes a `register_…` decorator.
Validation reads `names()` from the same table, so a name registered by a user's module is accepted
by the config checks exactly like a built-in one.
"""

from __future__ import annotations

from typing import Callable, Generic, Iterator, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Names registered for the config key `config_key` (e.g. "adv_estimator")."""

    def __init__(self, config_key: str) -> None:
        self.config_key = config_key
        self._entries: dict[str, T] = {}

    def register(self, name: str, *, replace: bool = False) -> Callable[[T], T]:
        """Decorator adding its target under `name`; a second registration of a name needs replace=True."""

        def decorate(target: T) -> T:
            self.add(name, target, replace=replace)
            return target

        return decorate

    def add(self, name: str, target: T, *, replace: bool = False) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"{self.config_key}: a registered name must be a non-empty string, got {name!r}")
        if name in self._entries and not replace and self._entries[name] is not target:
            raise ValueError(
                f"{self.config_key} {name!r} is already registered ({self._entries[name]!r}); "
                f"pick another name or pass replace=True to override it on purpose."
            )
        self._entries[name] = target

    def get(self, name: str) -> T:
        """The entry for `name`; a ValueError naming the registered names when there is none."""
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise ValueError(f"{self.config_key} must be one of {self.names()}, got {name!r}") from None

    def names(self) -> list[str]:
        return list(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.config_key!r}: {self.names()})"
