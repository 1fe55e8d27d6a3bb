"""The random proxy: answers with a random action, so an env loop can be debugged without a model."""

from __future__ import annotations

import random
from typing import Any

from roll.strategies.generation import GenerationRequest, GenerationResult

DEFAULT_ANSWERS = ("Left", "Down", "Right", "Up")


class RandomProxy:
    def __init__(self, tokenizer: Any, answers: list[str] | None = None, template: str = "<answer>{answer}</answer>",
                 seed: int = 0) -> None:
        self.tokenizer = tokenizer
        self.answers = list(answers or DEFAULT_ANSWERS)
        self.template = template
        self.rng = random.Random(seed)

    def generate(self, request: GenerationRequest) -> GenerationResult:
        text = self.template.format(answer=self.rng.choice(self.answers))
        ids = self.tokenizer.encode(text, add_special_tokens=False) + [self.tokenizer.eos_token_id]
        limit = request.sampling.max_new_tokens
        finish = "stop" if len(ids) <= limit else "length"  # cut like a model that runs out of tokens
        ids = ids[:limit]
        return GenerationResult(request_id=request.request_id, output_ids=ids, logprobs=[0.0] * len(ids),
                                finish_reason=finish)

    def release(self, session_id: str) -> None:
        pass
