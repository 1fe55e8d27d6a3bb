"""LLM proxies: what an env manager asks for the next response. Every proxy takes a GenerationRequest
and returns a GenerationResult (roll/strategies/generation.py), so env managers do not care who
answers: our inference workers (`policy`), any OpenAI-compatible server (`openai`), or a random
answer (`random`, to debug an env loop without a model)."""

from __future__ import annotations

from typing import Any

from roll.pipeline.agentic.llm_proxy.openai_proxy import OpenAIProxy
from roll.pipeline.agentic.llm_proxy.policy_proxy import PolicyProxy
from roll.pipeline.agentic.llm_proxy.random_proxy import RandomProxy

PROXY_TYPES = ("policy", "openai", "random")


def make_proxy(spec: dict[str, Any], tokenizer: Any, index: int = 0):
    """Builds a proxy from a picklable spec: {"type": "policy", "workers": [...]},
    {"type": "openai", "base_url": ..., "model": ..., "mode": "completions"|"chat"}, {"type": "random"}.
    `index` routes an env manager to a fixed inference worker (its KV cache lives there)."""
    kind = spec.get("type")
    options = {k: v for k, v in spec.items() if k != "type"}
    if kind == "policy":
        return PolicyProxy(index=index, **options)
    if kind == "openai":
        return OpenAIProxy(tokenizer=tokenizer, **options)
    if kind == "random":
        return RandomProxy(tokenizer=tokenizer, seed=options.pop("seed", 0) + index, **options)
    raise ValueError(f"llm proxy type must be one of {PROXY_TYPES}, got {kind!r}")


__all__ = ["OpenAIProxy", "PolicyProxy", "RandomProxy", "make_proxy", "PROXY_TYPES"]
