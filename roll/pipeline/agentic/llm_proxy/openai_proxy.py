"""The OpenAI-compatible proxy: any server that speaks /v1/completions or /v1/chat/completions.

`mode="completions"` sends the prompt as token ids and asks for the completion's token ids
(`return_token_ids`, which vLLM and roll's own server honour) and log-probs, so trajectories stay
exact. A server that returns only text is still usable: its text is tokenised (then the ids are the
tokenizer's reading of the text, not necessarily what the server sampled; the result says
`"exact_ids": False`). `mode="chat"` sends the messages and always tokenises the reply.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from roll.strategies.generation import GenerationRequest, GenerationResult


class OpenAIProxy:
    def __init__(self, tokenizer: Any, base_url: str, model: str = "default", mode: str = "completions",
                 api_key: str | None = None, timeout_s: float = 600.0) -> None:
        if mode not in ("completions", "chat"):
            raise ValueError(f"openai proxy mode must be 'completions' or 'chat', got {mode!r}")
        self.tokenizer, self.model, self.mode = tokenizer, model, mode
        self.base_url = base_url.rstrip("/")
        if not self.base_url.endswith("/v1"):
            self.base_url += "/v1"
        self.api_key, self.timeout_s = api_key, timeout_s

    def _post(self, path: str, body: dict) -> dict:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(self.base_url + path, data=json.dumps(body).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"{self.base_url + path} answered HTTP {exc.code}: {exc.read()[:500]!r}") from None
        except urllib.error.URLError as exc:
            raise ConnectionError(f"cannot reach the OpenAI-compatible server at {self.base_url}: {exc.reason}") from None

    def generate(self, request: GenerationRequest) -> GenerationResult:
        params = request.sampling
        sampling = {"model": self.model, "max_tokens": params.max_new_tokens,
                    "temperature": 0.0 if params.greedy else params.temperature, "top_p": params.top_p}
        if params.top_k:
            sampling["top_k"] = params.top_k  # an extension vLLM and roll's server accept
        if params.seed is not None:
            sampling["seed"] = params.seed
        if params.stop_strings:
            sampling["stop"] = list(params.stop_strings)
        if self.mode == "completions":
            body = {**sampling, "prompt": list(request.input_ids), "logprobs": 1, "return_token_ids": True}
            choice = self._post("/completions", body)["choices"][0]
        else:
            if not request.messages:
                raise ValueError("openai proxy in chat mode needs the request's messages")
            choice = self._post("/chat/completions", {**sampling, "messages": request.messages})["choices"][0]
            choice = {**choice, "text": choice["message"]["content"] or ""}
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        ids = choice.get("token_ids")
        exact = ids is not None
        if ids is None:
            ids = self.tokenizer.encode(choice.get("text", ""), add_special_tokens=False)
            if finish == "stop":
                ids.append(self.tokenizer.eos_token_id)  # the server stopped at its end of turn
        logprobs = ((choice.get("logprobs") or {}).get("token_logprobs")) or []
        if len(logprobs) != len(ids) or any(lp is None for lp in logprobs):
            logprobs = [0.0] * len(ids)
        return GenerationResult(request_id=request.request_id, output_ids=[int(t) for t in ids],
                                logprobs=[float(x) for x in logprobs], finish_reason=finish, exact_ids=exact)

    def release(self, session_id: str) -> None:
        pass
