"""How a reply is scored, as ROLL's GEM-registered envs score it: math by math-verify on the last
``\\boxed{}``, QA by exact match after normalisation on the last ``<answer>``, code by running the last
code block on each test's input in roll's namespace sandbox and comparing its output."""

from __future__ import annotations

import logging
import re
import string
from typing import Any, Optional

from roll.agentic.env.tool_use.sandbox import SandboxLimits, run_python

MAX_ANSWER_CHARS = 1000  # math-verify runs without its signal timeout (envs run in threads): keep inputs short
# math-verify warns on every call made without its (signal-based) timeouts, which roll cannot use
logging.getLogger("math_verify").setLevel(logging.ERROR)
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_CODE_BLOCK = re.compile(r"```[A-Za-z0-9_+-]*\n(.*?)```", re.DOTALL)


def last_boxed(text: str) -> Optional[str]:
    """The content of the last ``\\boxed{...}`` (braces balanced), or None."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, begin = 0, start + len("\\boxed{")
    for index in range(begin, len(text)):
        if text[index] == "{":
            depth += 1
        elif text[index] == "}":
            if depth == 0:
                content = text[begin:index].strip()
                return content or None
            depth -= 1
    return None


def last_answer_tag(text: str) -> Optional[str]:
    found = _ANSWER_TAG.findall(text)
    return found[-1].strip() or None if found else None


def last_code_block(text: str) -> Optional[str]:
    found = _CODE_BLOCK.findall(text)
    return found[-1].strip() or None if found else None


def gold_answers(value: Any) -> list[str]:
    """A record's answer column: one answer, or a list of accepted ones."""
    if isinstance(value, (list, tuple)):
        return [str(item) for item in value]
    return [str(value)]


def math_equal(answer: str, gold: Any) -> bool:
    """math-verify's equivalence of the two expressions (``1/2`` = ``0.5`` = ``\\frac{1}{2}``)."""
    from math_verify import parse, verify  # optional dependency (the gem extra)

    if len(answer) > MAX_ANSWER_CHARS:
        return False
    predicted = parse(f"\\boxed{{{answer}}}", parsing_timeout=None)
    for item in gold_answers(gold):
        expected = parse(f"\\boxed{{{item}}}", parsing_timeout=None)
        if expected and predicted and verify(expected, predicted, timeout_seconds=None):
            return True
    return False


def normalize_text(text: str) -> str:
    """Lower case, no punctuation, no English articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in string.punctuation)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def exact_match(answer: str, gold: Any) -> bool:
    return any(normalize_text(answer) == normalize_text(item) for item in gold_answers(gold))


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip().splitlines()]


def code_passes(code: str, tests: Any, max_tests: int, limits: SandboxLimits) -> bool:
    """Whether ``code`` prints each test's expected output for its input (``tests``: ``{"inputs": [...],
    "outputs": [...]}``, the CodeContests/TACO layout). The tests with the longest inputs are run
    first, at most ``max_tests`` of them; the first failure stops."""
    if not isinstance(tests, dict) or not isinstance(tests.get("inputs"), list) or not isinstance(tests.get("outputs"), list):
        raise ValueError(f"a code task's tests must be {{'inputs': [...], 'outputs': [...]}}, got {str(tests)[:200]}")
    pairs = sorted(zip(tests["inputs"], tests["outputs"]), key=lambda pair: len(str(pair[0])), reverse=True)
    for test_input, expected in pairs[:max_tests]:
        stdin = "\n".join(map(str, test_input)) if isinstance(test_input, list) else str(test_input)
        result = run_python(code, limits, stdin_text=stdin)
        want = "\n".join(map(str, expected)) if isinstance(expected, list) else str(expected)
        if not result.ok or _lines(result.output) != _lines(want):
            return False
    return True
