"""Models: resolving `pretrain`, the embedded default model, tiny test models."""

from roll.models.embedded import EMBEDDED_MODEL_NAME, prepare_embedded_model
from roll.models.resolve import resolve_model_path

__all__ = ["EMBEDDED_MODEL_NAME", "prepare_embedded_model", "resolve_model_path"]
