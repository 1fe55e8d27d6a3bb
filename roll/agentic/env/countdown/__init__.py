"""Countdown: a single-turn arithmetic puzzle (env.py, config.py, a safe parser in arith.py)."""
