"""ROLL's import path for the agentic config classes (`roll.pipeline.agentic.agentic_config.AgenticConfig`).

The classes live in roll/configs/agentic_config.py, below every layer that reads them; this module
re-exports them so code and YAMLs written for ROLL keep working.
"""

from roll.configs.agentic_config import AgenticConfig, CustomEnvConfig, EnvManagerConfig, SFTWarmupConfig

__all__ = ["AgenticConfig", "CustomEnvConfig", "EnvManagerConfig", "SFTWarmupConfig"]
