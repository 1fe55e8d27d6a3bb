"""Parse `device_mapping` as ROLL users write it, without `eval`.

Accepted: a list of ints, null, or a string holding a Python-like expression built from
`list(range(a, b[, step]))`, `[0, 1, 2]`, and `+` between them, e.g. "list(range(0,8))" or
"list(range(0,4)) + [6, 7]".
"""

from __future__ import annotations

import re

_RANGE = re.compile(r"^list\(\s*range\(\s*(-?\d+)\s*(?:,\s*(-?\d+)\s*)?(?:,\s*(-?\d+)\s*)?\)\s*\)$")
_LIST = re.compile(r"^\[\s*((?:\d+\s*,\s*)*\d+)?\s*,?\s*\]$")

_HOW_TO = 'write a list such as [0, 1] or a string such as "list(range(0,8))"'


def parse_device_mapping(value: object, where: str = "device_mapping") -> list[int] | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"{where}: got {value!r}; {_HOW_TO}")
    if isinstance(value, int):
        return [value]
    if isinstance(value, (list, tuple)):
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise ValueError(f"{where}: every entry must be an integer device id, got {list(value)!r}; {_HOW_TO}")
        ids = list(value)
    elif isinstance(value, str):
        ids = []
        for part in value.split("+"):
            ids.extend(_parse_term(part.strip(), value, where))
    else:
        raise ValueError(f"{where}: got {type(value).__name__} {value!r}; {_HOW_TO}")
    if any(i < 0 for i in ids):
        raise ValueError(f"{where}: device ids must be >= 0, got {ids}")
    if len(set(ids)) != len(ids):
        raise ValueError(f"{where}: device ids repeat in {ids}; list each device once")
    return ids


def _parse_term(term: str, whole: str, where: str) -> list[int]:
    match = _RANGE.match(term)
    if match:
        a, b, step = match.groups()
        start, stop = (0, int(a)) if b is None else (int(a), int(b))
        step_value = int(step) if step is not None else 1
        if step_value == 0:
            raise ValueError(f"{where}: range step cannot be 0 in {whole!r}")
        ids = list(range(start, stop, step_value))
        if not ids:
            raise ValueError(f"{where}: {term!r} is an empty range; {_HOW_TO}")
        return ids
    match = _LIST.match(term)
    if match:
        return [int(x) for x in re.findall(r"\d+", term)]
    if term.isdigit():
        return [int(term)]
    raise ValueError(f"{where}: cannot parse {whole!r} (the part {term!r} is neither list(range(a,b)) nor [ids]); {_HOW_TO}")
