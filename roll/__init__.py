"""roll: reinforcement learning for LLM agents in multi-turn environments."""

__version__ = "0.1.0"
