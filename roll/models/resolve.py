"""Turn a `pretrain` / `model_name_or_path` value into a local Hugging Face folder."""

from __future__ import annotations

import os
from pathlib import Path

from roll.models.embedded import EMBEDDED_MODEL_NAME, prepare_embedded_model
from roll.models.tiny import TINY_MODEL_NAMES, prepare_tiny_model

_EMBEDDED_ALIASES = {EMBEDDED_MODEL_NAME.lower(), f"huggingfacetb/{EMBEDDED_MODEL_NAME.lower()}", "embedded"}


def is_embedded(name: str) -> bool:
    return name.strip().lower() in _EMBEDDED_ALIASES


def resolve_model_path(name: str) -> str:
    """A local folder for `name`: the folder itself, the embedded SmolLM2 (converted once), a tiny random
    model by name (built once), or a hub id already in the local Hugging Face cache / downloadable.
    Raises FileNotFoundError saying what to do."""
    if is_embedded(name):
        return str(prepare_embedded_model())
    if name.strip() in TINY_MODEL_NAMES:
        return str(prepare_tiny_model(name.strip()))
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"model path {name!r} exists but holds no config.json: point it at a Hugging Face model folder.")
        return str(path.resolve())
    if _looks_like_hub_id(name):
        return _from_hub(name)
    raise FileNotFoundError(
        f"model path {name!r} does not exist. Give a local Hugging Face folder, a hub id (where a hub is "
        f"reachable), {EMBEDDED_MODEL_NAME} (the embedded CPU model), or a tiny random model for smoke tests "
        f"({', '.join(TINY_MODEL_NAMES)})."
    )


def _looks_like_hub_id(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and all(parts) and not name.startswith((".", "/", "~"))


def _from_hub(repo_id: str) -> str:
    from huggingface_hub import snapshot_download

    try:  # the local cache first, so offline machines with a cached model work
        return snapshot_download(repo_id, local_files_only=True)
    except Exception:
        pass
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        raise FileNotFoundError(f"model {repo_id!r} is not in the local Hugging Face cache and HF_HUB_OFFLINE=1.")
    try:
        return snapshot_download(repo_id, allow_patterns=["*.json", "*.safetensors", "*.model", "*.txt", "*.jinja"], etag_timeout=10)
    except Exception as error:
        raise FileNotFoundError(
            f"model {repo_id!r} is neither a local folder nor downloadable from the Hugging Face hub here "
            f"({type(error).__name__}). Download it where a hub is reachable and point pretrain at the folder, "
            f"or use {EMBEDDED_MODEL_NAME} (the embedded CPU model)."
        ) from None
