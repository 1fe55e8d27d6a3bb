"""Write small generated data files for the dataset tasks (roll_math, roll_qa, roll_code and GEM's
math/qa/code ids): math.jsonl, math.parquet, qa.jsonl and code.jsonl in the folder given, in the
columns ROLL's configs read. Nothing is downloaded: the questions are made here.

    python scripts/make_task_samples.py OUT_DIR
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

# (question, accepted answers)
QA_FACTS = [
    ("Which planet is closest to the Sun?", ["Mercury"]),
    ("How many days are in a leap year?", ["366", "three hundred sixty-six"]),
    ("What is the chemical symbol for gold?", ["Au"]),
    ("Which gas do plants take in for photosynthesis?", ["carbon dioxide", "CO2"]),
    ("What is the largest ocean on Earth?", ["the Pacific Ocean", "Pacific"]),
    ("How many sides does a hexagon have?", ["6", "six"]),
]


def math_records(rng: random.Random, count: int) -> list[dict]:
    records = []
    for _ in range(count):
        a, b, c = rng.randint(2, 20), rng.randint(2, 20), rng.randint(2, 9)
        if rng.random() < 0.5:
            records.append({"problem": f"What is {a} + {b} * {c}?", "answer": str(a + b * c)})
        else:  # an answer math-verify must read as a fraction
            records.append({"problem": f"Simplify the fraction {a * c}/{b * c}.", "answer": f"\\frac{{{a}}}{{{b}}}"})
    return records


def code_records(rng: random.Random, count: int) -> list[dict]:
    kinds = [
        ("Read two integers on one line and print their sum.", lambda a, b: a + b),
        ("Read two integers on one line and print their product.", lambda a, b: a * b),
        ("Read two integers on one line and print the larger one.", max),
    ]
    records = []
    for index in range(count):
        text, fn = kinds[index % len(kinds)]
        pairs = [(rng.randint(-50, 50), rng.randint(-50, 50)) for _ in range(3)]
        tests = {"inputs": [f"{a} {b}\n" for a, b in pairs], "outputs": [f"{fn(a, b)}\n" for a, b in pairs]}
        records.append({"problem": text, "tests": tests})
    return records


def write_jsonl(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")


def main(out_dir: str) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    maths = math_records(rng, 16)
    write_jsonl(out / "math.jsonl", maths)
    write_jsonl(out / "qa.jsonl", [{"question": q, "answer": a} for q, a in QA_FACTS])
    write_jsonl(out / "code.jsonl", code_records(rng, 6))
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        print("pyarrow is not installed: math.parquet not written", file=sys.stderr)
    else:
        pq.write_table(pa.Table.from_pylist(maths), out / "math.parquet")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
