"""Guess the number: a multi-turn dialogue env with higher/lower feedback."""
