"""Vision-language models (Qwen2.5-VL and its family): loading, image inputs, 3-D rope positions.

transformers maps these architectures to `AutoModelForImageTextToText`, not `AutoModelForCausalLM`;
`load_lm` picks the right auto class from the folder's config, so the train and infer strategies
load either kind the same way.

Images enter as Qwen2-VL does it: the model's image processor turns each image into patch rows
(`pixel_values [patches, C·T·P·P]`) and its grid (`image_grid_thw [1, 3]`: temporal, height, width
patches), and the prompt holds one image placeholder token per merged patch group
(t·h·w / merge_size²). Text tokens keep 1-D positions (repeated on three axes) and an image's tokens
get (temporal, row, column) positions: the model's own `get_rope_index` computes them from the ids
and the grids.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, AutoImageProcessor, AutoModelForCausalLM, AutoModelForImageTextToText


def is_vision_language(config: Any) -> bool:
    """Whether a model config (or its folder) is a vision-language model (it has a vision tower)."""
    if isinstance(config, (str, Path)):
        config = AutoConfig.from_pretrained(config)
    return getattr(config, "vision_config", None) is not None


def load_lm(path: str | Path, **kwargs: Any) -> torch.nn.Module:
    """The model at `path` with its language-model head: a causal LM, or a vision-language model."""
    auto = AutoModelForImageTextToText if is_vision_language(path) else AutoModelForCausalLM
    return auto.from_pretrained(path, **kwargs)


def load_image_processor(path: str | Path) -> Any:
    """The model's own image processor (resize, patching, normalisation). Not AutoProcessor: in
    transformers 5 that also builds Qwen2-VL's video processor, which needs torchvision."""
    if not (Path(path) / "preprocessor_config.json").is_file():
        raise FileNotFoundError(f"{path} has no image processor (preprocessor_config.json): it is not a "
                                "vision-language model folder")
    return AutoImageProcessor.from_pretrained(path)


def image_placeholder_count(image_grid_thw: torch.Tensor, merge_size: int) -> int:
    """How many placeholder tokens one image takes in the prompt: its patches after merge_size² merging."""
    return int(image_grid_thw.prod()) // merge_size**2


def rope_position_ids(model: torch.nn.Module, input_ids: torch.Tensor, image_grid_thw: torch.Tensor | None,
                      lengths: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """3-D rope positions `[3, rows, width]` of right-padded rows (`lengths` real tokens each; padding
    gets 0) and each row's offset `[rows, 1]` between its next position and its length (what decoding
    adds to the 1-D position of each new token). `image_grid_thw [images, 3]` lists the rows' images in
    order."""
    config = model.config
    width = input_ids.shape[1]
    attention_mask = (torch.arange(width, device=input_ids.device)[None, :]
                      < torch.tensor(lengths, device=input_ids.device)[:, None]).long()
    token_types = (input_ids == config.image_token_id).int()
    base = model.model if hasattr(model, "model") and hasattr(model.model, "get_rope_index") else model
    return base.get_rope_index(input_ids, mm_token_type_ids=token_types, image_grid_thw=image_grid_thw,
                               attention_mask=attention_mask)
