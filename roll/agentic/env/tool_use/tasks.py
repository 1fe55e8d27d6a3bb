"""Tasks that need the Python tool to be solved reliably, each drawn from a seed.

- ``multiplication``: the product of two ``num_digits``-digit integers (beyond any small model's
  mental arithmetic, one line of Python).
- ``table_lookup``: a question over ``inventory.csv``, a table that exists only in the tool's work
  dir (the model never sees its rows): the total stock value of one category.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

TASKS = ("multiplication", "table_lookup")
_ITEMS = ["bolt", "nut", "gear", "spring", "valve", "pipe", "hinge", "lever", "pulley", "washer", "rivet", "clamp"]
_CATEGORIES = ["north", "south", "east", "west"]


@dataclass(frozen=True)
class Task:
    question: str
    answer: int
    files: dict[str, str] = field(default_factory=dict)  # put in the tool's work dir
    # Python that prints the answer from what the question states (what a competent model writes as
    # its tool call); it holds no answer, only the computation (the scripted tool policy runs it)
    solver_code: str = ""


def multiplication(rng: random.Random, num_digits: int) -> Task:
    low, high = 10 ** (num_digits - 1), 10**num_digits - 1
    a, b = rng.randint(low, high), rng.randint(low, high)
    return Task(f"What is {a} * {b}? Give the exact integer.", a * b, solver_code=f"print({a} * {b})")


def table_lookup(rng: random.Random, rows: int) -> Task:
    lines = ["item,warehouse,quantity,unit_price"]
    total_by_category: dict[str, int] = {name: 0 for name in _CATEGORIES}
    for index in range(rows):
        item = f"{rng.choice(_ITEMS)}-{index:03d}"
        warehouse = rng.choice(_CATEGORIES)
        quantity, price = rng.randint(1, 500), rng.randint(1, 999)
        total_by_category[warehouse] += quantity * price
        lines.append(f"{item},{warehouse},{quantity},{price}")
    warehouse = rng.choice(sorted(name for name, total in total_by_category.items() if total > 0))
    question = (
        f"The file inventory.csv (columns: {lines[0]}) is in the Python tool's current directory. What is the "
        f"total stock value (sum of quantity * unit_price) of all items in warehouse '{warehouse}'? Give the exact integer."
    )
    code = ("import csv\nrows = csv.DictReader(open('inventory.csv'))\n"
            f"print(sum(int(r['quantity']) * int(r['unit_price']) for r in rows if r['warehouse'] == {warehouse!r}))")
    return Task(question, total_by_category[warehouse], {"inventory.csv": "\n".join(lines) + "\n"}, code)


def make_task(name: str, rng: random.Random, num_digits: int, table_rows: int) -> Task:
    if name == "multiplication":
        return multiplication(rng, num_digits)
    return table_lookup(rng, table_rows)
