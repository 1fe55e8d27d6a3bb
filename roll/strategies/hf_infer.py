"""`hf_infer`: generation with a transformers model on CPU or one GPU, through roll's decode engine.

The strategy owns the model and the tokenizer and hands generation to `DecodeEngine` (continuous
batching, per-episode KV cache kept between turns, a fixed KV budget: roll/strategies/engine_budget.py).
It is a small adapter:
`generate`, `release`, `load_state_dict`, `state_dict`. A vision-language model (Qwen2.5-VL) generates
through `VisionEngine` instead (vision_engine.py: images in the prompt, 3-D rope positions).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import AutoTokenizer

from roll.models.vision import is_vision_language, load_lm
from roll.strategies.decode_engine import DecodeEngine
from roll.strategies.engine_budget import EngineBudget, with_config
from roll.strategies.generation import GenerationRequest, GenerationResult
from roll.strategies.vision_engine import VisionEngine
from roll.utils.weight_checksum import state_checksums

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def eos_token_ids(model: torch.nn.Module, tokenizer: Any) -> list[int]:
    """Every id that ends a turn: the tokenizer's eos plus the generation config's (an int or a list)."""
    ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    configured = getattr(model.generation_config, "eos_token_id", None)
    if isinstance(configured, int):
        ids.add(configured)
    elif configured:
        ids.update(configured)
    if not ids:
        raise ValueError("the model has no eos token (neither tokenizer.eos_token_id nor generation_config.eos_token_id)")
    return sorted(ids)


class HFInferStrategy:
    """Loads `model_path` and serves `generate(requests)` (GenerationRequest in, GenerationResult out;
    roll/strategies/generation.py). `max_sessions`, `max_model_len`, `max_prefill_tokens` are the
    engine budget's defaults (the pipeline derives them from the run); `strategy_config` keys
    (max_num_seqs, max_model_len, max_num_batched_tokens) override them."""

    def __init__(self, model_path: str | Path, dtype: str = "fp32", attn_implementation: str | None = None,
                 device: str = "cpu", max_batch_size: int = 64, max_prefill_tokens: int = 4096,
                 max_sessions: int = 64, max_model_len: int = 4096, strategy_config: dict[str, Any] | None = None,
                 seed: int = 0) -> None:
        if dtype not in DTYPES:
            raise ValueError(f"model_args.dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
        self.budget = with_config(EngineBudget(max_sessions, max_model_len, max_prefill_tokens), strategy_config)
        path = Path(model_path)
        if not path.exists():
            raise FileNotFoundError(f"hf_infer: model path {str(model_path)!r} does not exist")
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        kwargs: dict[str, Any] = {"dtype": DTYPES[dtype]}
        if attn_implementation:
            kwargs["attn_implementation"] = "flash_attention_2" if attn_implementation == "fa2" else attn_implementation
        self.model = load_lm(path, **kwargs).to(device).eval()
        self.model.requires_grad_(False)
        decode_text = lambda ids: self.tokenizer.decode(ids, skip_special_tokens=False)  # noqa: E731
        if is_vision_language(self.model.config):
            self.engine = VisionEngine(self.model, eos_token_ids(self.model, self.tokenizer), decode_text,
                                       max_model_len=self.budget.max_model_len, seed=seed)
            return
        self.engine = DecodeEngine(
            self.model,
            eos_token_ids(self.model, self.tokenizer),
            decode_text=decode_text,
            max_batch_size=max_batch_size,
            max_prefill_tokens=self.budget.max_num_batched_tokens,
            max_sessions=self.budget.max_num_seqs,
            max_model_len=self.budget.max_model_len,
            seed=seed,
        ).start()

    def generate(self, requests: list[GenerationRequest], timeout: float | None = None) -> list[GenerationResult]:
        return self.engine.generate(requests, timeout=timeout)

    def release(self, session_ids: list[str]) -> None:
        self.engine.release(session_ids)

    def load_state_dict(self, state_dict: dict[str, torch.Tensor], version: int) -> None:
        """Copies new weights in place (the engine reads the model's own tensors) and drops stale KV."""
        missing, unexpected = self.model.load_state_dict(state_dict, strict=False)
        unexpected = [k for k in unexpected if not k.endswith("rotary_emb.inv_freq")]
        if unexpected:
            raise KeyError(f"update_weights: keys not in the inference model: {unexpected[:5]}")
        self.engine.reset_cache(weight_version=version)

    def weight_checksums(self) -> dict[str, int]:
        """Checksums of the weights the engine generates with (roll/utils/weight_checksum.py)."""
        return state_checksums(self.model.state_dict())

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self.model.state_dict()

    def shutdown(self) -> None:
        self.engine.stop()
