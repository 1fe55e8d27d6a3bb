"""A small arithmetic parser for Countdown answers: integers, + - * /, parentheses. No eval.

Exact arithmetic with Fraction, so ``6/4*2`` is 3 and never 2.9999999. Inputs are bounded
(length, nesting, digits) so hostile text cannot make it slow or overflow the recursion.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

MAX_CHARS = 300
MAX_DEPTH = 40
MAX_DIGITS = 12
_TOKEN = re.compile(r"\s*(?:(\d+)|(.))", re.ASCII | re.DOTALL)
_SYNONYMS = {"×": "*", "x": "*", "X": "*", "÷": "/", "−": "-", "–": "-"}


class ExpressionError(ValueError):
    """The text is not a well-formed arithmetic expression (or divides by zero)."""


@dataclass(frozen=True)
class Evaluated:
    value: Fraction
    numbers: tuple[int, ...]  # the integer literals used, in order


def _tokenize(text: str) -> list[str]:
    tokens = []
    for number, char in _TOKEN.findall(text):
        if number:
            if len(number) > MAX_DIGITS:
                raise ExpressionError(f"number with more than {MAX_DIGITS} digits")
            tokens.append(number)
        elif char.strip():
            char = _SYNONYMS.get(char, char)
            if char not in "+-*/()":
                raise ExpressionError(f"unexpected character {char!r}")
            tokens.append(char)
    return tokens


def evaluate(text: str) -> Evaluated:
    """Parse and evaluate ``text``. A trailing ``= <number>`` (models often write one) is ignored."""
    if len(text) > MAX_CHARS:
        raise ExpressionError(f"expression longer than {MAX_CHARS} characters")
    left, sep, right = text.partition("=")
    if sep and not re.fullmatch(r"\s*-?\d*\s*", right):
        raise ExpressionError("only 'expression' or 'expression = number' is accepted")
    tokens = _tokenize(left)
    if not tokens:
        raise ExpressionError("empty expression")
    parser = _Parser(tokens)
    value = parser.expression(0)
    if parser.pos != len(tokens):
        raise ExpressionError(f"unexpected {tokens[parser.pos]!r}")
    return Evaluated(value, tuple(parser.numbers))


class _Parser:
    """Recursive descent: expression = term (('+'|'-') term)*; term = factor (('*'|'/') factor)*;
    factor = integer | '(' expression ')'. No unary signs: Countdown combines the given numbers."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens, self.pos, self.numbers = tokens, 0, []

    def _peek(self) -> str:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else ""

    def expression(self, depth: int) -> Fraction:
        value = self.term(depth)
        while self._peek() in ("+", "-"):
            op = self.tokens[self.pos]
            self.pos += 1
            rhs = self.term(depth)
            value = value + rhs if op == "+" else value - rhs
        return value

    def term(self, depth: int) -> Fraction:
        value = self.factor(depth)
        while self._peek() in ("*", "/"):
            op = self.tokens[self.pos]
            self.pos += 1
            rhs = self.factor(depth)
            if op == "/" and rhs == 0:
                raise ExpressionError("division by zero")
            value = value * rhs if op == "*" else value / rhs
        return value

    def factor(self, depth: int) -> Fraction:
        token = self._peek()
        if token.isdigit():
            self.pos += 1
            self.numbers.append(int(token))
            return Fraction(int(token))
        if token == "(":
            if depth >= MAX_DEPTH:
                raise ExpressionError(f"parentheses nested deeper than {MAX_DEPTH}")
            self.pos += 1
            value = self.expression(depth + 1)
            if self._peek() != ")":
                raise ExpressionError("missing ')'")
            self.pos += 1
            return value
        raise ExpressionError(f"expected a number or '(', got {token or 'end of text'!r}")
