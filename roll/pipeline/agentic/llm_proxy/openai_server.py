"""A small OpenAI-compatible HTTP server in front of a roll generation engine (anything with
`generate(requests)`, e.g. HFInferStrategy or InferWorker). It serves /v1/completions (prompt as
text or token ids; the reply carries `token_ids` and `logprobs.token_logprobs`) and
/v1/chat/completions, so external tools can talk to a roll policy, and the OpenAI proxy has a real
server to be tested against."""

from __future__ import annotations

import itertools
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from roll.strategies.generation import GenerationRequest, SamplingParams

# The OpenAI API's own defaults for a request body that leaves a field out (the wire protocol's,
# not roll's: a roll run's sampling comes from its GeneratingArgs).
OPENAI_DEFAULTS = {"max_tokens": 16, "temperature": 1.0, "top_p": 1.0, "top_k": 0}


def _request_from_body(body: dict, input_ids: list[int]) -> GenerationRequest:
    """The wire format's sampling fields parsed once into a typed request (a bad value is a 400)."""
    value = {**OPENAI_DEFAULTS, **{k: body[k] for k in OPENAI_DEFAULTS if body.get(k) is not None}}
    temperature = float(value["temperature"])
    stop = body.get("stop")
    sampling = SamplingParams(max_new_tokens=int(value["max_tokens"]), do_sample=temperature > 0, temperature=temperature,
                              top_p=float(value["top_p"]), top_k=int(value["top_k"]),
                              stop_strings=[stop] if isinstance(stop, str) else stop,
                              seed=int(body["seed"]) if body.get("seed") is not None else None)
    return GenerationRequest(input_ids=input_ids, sampling=sampling)


def serve_openai(engine: Any, tokenizer: Any, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """Starts the server in a daemon thread; `server.server_address` has the bound port; stop with
    `server.shutdown()`."""
    counter = itertools.count()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test and rollout logs clean
            pass

        def _reply(self, code: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                if self.path.rstrip("/").endswith("/chat/completions"):
                    text = tokenizer.apply_chat_template(body["messages"], tokenize=False, add_generation_prompt=True)
                    ids = tokenizer.encode(text, add_special_tokens=False)
                elif self.path.rstrip("/").endswith("/completions"):
                    prompt = body["prompt"]
                    ids = list(prompt) if isinstance(prompt, list) else tokenizer.encode(prompt, add_special_tokens=False)
                else:
                    return self._reply(404, {"error": {"message": f"unknown path {self.path}"}})
                result = engine.generate([_request_from_body(body, ids)])[0]
            except (KeyError, ValueError, TypeError) as exc:
                return self._reply(400, {"error": {"message": f"{type(exc).__name__}: {exc}"}})
            out = result.output_ids
            text = tokenizer.decode(out[:-1] if result.finish_reason == "stop" else out, skip_special_tokens=False)
            choice = {"index": 0, "finish_reason": result.finish_reason, "token_ids": out,
                      "logprobs": {"token_logprobs": result.logprobs}}
            if "chat" in self.path:
                choice["message"] = {"role": "assistant", "content": text}
            else:
                choice["text"] = text
            self._reply(200, {"id": f"roll-{next(counter)}", "object": "text_completion", "model": body.get("model"),
                              "choices": [choice], "usage": {"prompt_tokens": len(ids), "completion_tokens": len(out)}})

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="openai-server", daemon=True).start()
    return server
