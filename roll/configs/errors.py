"""The one error type for bad configuration, raised before any worker starts."""

from __future__ import annotations

import difflib
from typing import Iterable


class ConfigError(ValueError):
    """A configuration problem: the message names the key, what is wrong, and how to fix it."""


def closest(name: str, candidates: Iterable[str]) -> str | None:
    matches = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return matches[0] if matches else None


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    match = closest(name, candidates)
    return f" Did you mean {match!r}?" if match else ""
