"""Turning a model's raw text into (think, answer) parts, shared by every env.

Nothing here may raise on model text: models write anything, and one bad sample must never stop a
rollout. Every failure is reported as a reason string instead.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Optional

# The `regex` package (a dependency of transformers) matches like `re` but accepts a timeout: a
# lazy pattern such as the think+answer one backtracks cubically on hostile text (10k chars of
# repeated "<think>a</think><answer>b" take seconds in `re`), and one such sample must not stall a
# rollout. Text whose matching exceeds the timeout is treated as having no usable answer.
import regex

PARSE_TIMEOUT_S = 0.05
# The timeout is wall time, so on a loaded machine a short, harmless text can miss it only because its
# thread was not scheduled (seen with 64 envs on 2 busy cores: a valid answer judged invalid). Text this
# short cannot backtrack for long, so it gets a second try with a generous limit.
RETRY_MAX_CHARS = 2_000
RETRY_TIMEOUT_S = 1.0
DEFAULT_ACTION_PATTERN = r"<answer>(.*?)</answer>"
THINK_ACTION_PATTERN = r"<think>(.*?)</think>\s*<answer>(.*?)</answer>"

# Chat templates end or frame turns with these. Generation usually stops on them, but a model may
# still emit one inside the text (or the env manager may pass the stop token along), and they must
# not decide whether an answer parses. `<|...|>` covers ChatML, Llama-3 and Phi families.
_PIPE_TOKEN = re.compile(r"<\|[^<>|\s]{1,40}\|>")
DEFAULT_SPECIAL_TOKENS: tuple[str, ...] = (
    "</s>",
    "<s>",
    "<eos>",
    "<bos>",
    "<pad>",
    "<start_of_turn>",
    "<end_of_turn>",
    "[INST]",
    "[/INST]",
)


@dataclass(frozen=True)
class ParsedText:
    """What was read from one model output. `answer` is None when nothing usable was found."""

    think: Optional[str]
    answer: Optional[str]
    error: Optional[str]


def strip_special_tokens(text: str, extra_tokens: Iterable[str] = ()) -> str:
    """Remove chat special tokens (``<|im_end|>``, ``<|eot_id|>``, ``</s>`` ...) from ``text``."""
    text = _PIPE_TOKEN.sub("", text)
    for token in (*DEFAULT_SPECIAL_TOKENS, *extra_tokens):
        if token:
            text = text.replace(token, "")
    return text


@lru_cache(maxsize=64)
def compile_action_pattern(pattern: str) -> "regex.Pattern":
    """Compile a user's action regex once; DOTALL because thoughts and answers span lines."""
    try:
        return regex.compile(pattern, regex.DOTALL | regex.VERSION0)
    except regex.error as exc:
        raise ValueError(f"action_pattern {pattern!r} is not a valid regular expression: {exc}") from exc


def parse_model_text(text: object, pattern: str, extra_special_tokens: Iterable[str] = ()) -> ParsedText:
    """Extract the think and answer parts of ``text`` with ``pattern``.

    Group rules: named groups ``think``/``answer`` win; otherwise with two or more groups the first
    is the thought and the last the answer; with one group it is the answer; with none the whole
    match is. More than one match is ambiguous (which answer did the model mean?) and is rejected.
    """
    if not isinstance(text, str):
        return ParsedText(None, None, f"expected text, got {type(text).__name__}")
    pattern_re = compile_action_pattern(pattern)
    cleaned = strip_special_tokens(text, tuple(extra_special_tokens))
    matches = _first_two_matches(pattern_re, cleaned, PARSE_TIMEOUT_S)
    if matches is None and len(cleaned) <= RETRY_MAX_CHARS:
        matches = _first_two_matches(pattern_re, cleaned, RETRY_TIMEOUT_S)
    if matches is None:
        return ParsedText(None, None, f"matching action_pattern took over {PARSE_TIMEOUT_S * 1000:.0f} ms")
    if not matches:
        return ParsedText(None, None, "no match for action_pattern")
    if len(matches) > 1:
        return ParsedText(None, None, "more than one match for action_pattern; expected exactly one")
    match = matches[0]
    named = match.groupdict()
    if "answer" in named:
        think, answer = named.get("think"), named["answer"]
    elif pattern_re.groups >= 2:
        think, answer = match.group(1), match.group(pattern_re.groups)
    elif pattern_re.groups == 1:
        think, answer = None, match.group(1)
    else:
        think, answer = None, match.group(0)
    if answer is None:
        return ParsedText(think, None, "the answer group did not participate in the match")
    answer = answer.strip()
    if not answer:
        return ParsedText(think, None, "empty answer")
    return ParsedText(think.strip() if think is not None else None, answer, None)


def _first_two_matches(pattern_re: "regex.Pattern", text: str, timeout_s: float) -> Optional[list]:
    """Up to two matches (two already make the text ambiguous), or None when matching timed out."""
    try:
        return list(itertools.islice(pattern_re.finditer(text, timeout=timeout_s), 2))
    except TimeoutError:
        return None


def match_action_name(answer: str, action_names: Iterable[str]) -> Optional[str]:
    """Return the canonical action name equal to ``answer`` ignoring case and outer whitespace."""
    wanted = answer.strip().casefold()
    for name in action_names:
        if name.casefold() == wanted:
            return name
    return None
