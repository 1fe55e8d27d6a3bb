"""The config schema: every config dataclass and its defaults (AgenticConfig included). Data only:
loading YAML into it and validating it happen in roll/launch/, above every layer that reads it."""

from roll.configs.errors import ConfigError
from roll.configs.worker_config import WorkerConfig

__all__ = ["ConfigError", "WorkerConfig"]
