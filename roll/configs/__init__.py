"""Configuration: dataclasses, Hydra loading, validation."""

from roll.configs.errors import ConfigError
from roll.configs.loader import load_config
from roll.configs.worker_config import WorkerConfig

__all__ = ["ConfigError", "load_config", "WorkerConfig"]
