"""Generation for vision-language models (hf_infer with a Qwen2.5-VL-style model).

One request at a time: the whole prompt is prefilled with its images (the vision tower runs on the
request's `vision` inputs, their features fill the image placeholder tokens), then tokens are decoded
one by one on a transformers DynamicCache. Positions are the model's 3-D rope positions: computed by
its own `get_rope_index` for the prompt, and for each new token its 1-D position plus the prompt's
offset (roll/models/vision.py), passed explicitly so concurrent requests never share the model's
cached rope offsets. No KV cache is kept between an episode's turns: each turn's prompt is prefilled
whole, which is exact and simple, and slower than the decode engine's session reuse (hf_infer is the
CPU and debugging engine; a VL model's prompt is short next to its images' vision-tower cost).

The model's vision tokens (image placeholder, vision start/end) are never sampled: they stand for
images, which a reply cannot carry. Same interface as DecodeEngine where hf_infer uses it: generate, release, reset_cache, stop, stats.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

import torch
from transformers import DynamicCache

from roll.models.vision import rope_position_ids
from roll.strategies.decode_engine import finish_reason
from roll.strategies.generation import GenerationRequest, GenerationResult
from roll.strategies.sampling import sample_tokens

VISION_TOKEN_KEYS = ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id")


class VisionEngine:
    def __init__(self, model: torch.nn.Module, eos_token_ids: list[int], decode_text: Callable[[list[int]], str],
                 max_model_len: int = 4096, seed: int = 0) -> None:
        self.model = model.eval()
        self.device = next(model.parameters()).device
        self.eos = set(int(t) for t in eos_token_ids)
        self.decode_text = decode_text
        self.max_model_len, self.seed = max_model_len, seed
        # a generated image placeholder would be an image without pixels (the model and the trainer would
        # match the prompt's images to the wrong placeholders): the vision tokens are never sampled
        self.vision_token_ids = [getattr(model.config, key) for key in VISION_TOKEN_KEYS
                                 if getattr(model.config, key, None) is not None]
        self.weight_version = 0
        self.lock = threading.Lock()  # one request at a time: the model's forward is not re-entrant here
        self.stats = {"prefill_tokens": 0, "cached_tokens": 0, "decode_tokens": 0, "prefill_s": 0.0, "decode_s": 0.0}

    def generate(self, requests: list[GenerationRequest], timeout: float | None = None) -> list[GenerationResult]:
        for req in requests:
            needed = len(req.input_ids) + req.sampling.max_new_tokens
            if needed > self.max_model_len:
                raise ValueError(f"generation request {req.request_id!r} needs {needed} tokens, over max_model_len "
                                 f"{self.max_model_len}: raise actor_infer.strategy_args.strategy_config.max_model_len")
        with self.lock:
            return [self._generate_one(req) for req in requests]

    @torch.inference_mode()
    def _generate_one(self, req: GenerationRequest) -> GenerationResult:
        ids = torch.tensor([req.input_ids], device=self.device)
        grid = req.vision.image_grid_thw.to(self.device) if req.vision is not None else None
        positions, offset = rope_position_ids(self.model, ids, grid, [ids.shape[1]])
        inputs = {"input_ids": ids, "position_ids": positions}
        if req.vision is not None:
            inputs.update(pixel_values=req.vision.pixel_values.to(self.device), image_grid_thw=grid)
        generator = None
        if not req.sampling.greedy:
            seed = req.sampling.seed if req.sampling.seed is not None else self.seed + len(req.input_ids)
            generator = torch.Generator().manual_seed(int(seed))
        cache = DynamicCache(config=self.model.config)
        output_ids: list[int] = []
        logprobs: list[float] = []
        reason = None
        start = time.perf_counter()
        while reason is None:
            logits = self.model(**inputs, cache=cache, use_cache=True, logits_to_keep=1).logits[:, -1].float()
            allowed = logits.clone()
            allowed[:, self.vision_token_ids] = float("-inf")
            token, _ = sample_tokens(allowed, [req.sampling], [generator])
            # the recorded log-prob is the model's own (what the trainer recomputes), not the masked one
            logp = torch.log_softmax(logits, dim=-1).gather(1, token[:, None])[:, 0]
            output_ids.append(int(token[0]))
            logprobs.append(float(logp[0]))
            reason = finish_reason(output_ids, req.sampling, self.eos, self.decode_text)
            position = ids.shape[1] + len(output_ids) - 1 + offset  # [1, 1]: the new token's 1-D position + offset
            inputs = {"input_ids": token[:, None], "position_ids": position.view(1, 1, 1).expand(3, 1, 1)}
        self.stats["prefill_tokens"] += ids.shape[1]
        self.stats["decode_tokens"] += len(output_ids)
        self.stats["decode_s"] += time.perf_counter() - start
        return GenerationResult(request_id=req.request_id, output_ids=output_ids, logprobs=logprobs,
                                finish_reason=reason, prefilled_tokens=ids.shape[1], weight_version=self.weight_version)

    def release(self, session_ids: list[str]) -> None:
        """Nothing to free: no cache outlives its request."""

    def reset_cache(self, weight_version: int | None = None) -> None:
        if weight_version is not None:
            self.weight_version = weight_version

    def stop(self) -> None:
        """Nothing runs in the background."""
