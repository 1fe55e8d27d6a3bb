"""roll's OpenAI-compatible server (FastAPI + uvicorn) in front of a roll policy.

Endpoints: `/v1/chat/completions` (tools and tool_choice, n, stop, max_tokens / max_completion_tokens,
temperature, top_p, seed, logprobs, SSE streaming), `/v1/completions` (prompt as text or token ids)
and `/v1/models`. Each is also served under `/episodes/{key}/v1/...`.

Generation goes through roll's GenerationRequest/GenerationResult contract, so any engine serves:
`engine` is anything with `generate(list[GenerationRequest]) -> list[GenerationResult]` (HFInferStrategy,
an InferWorker, the vllm strategy). Tool calls are parsed in the model's chat-template format
(tool_calls.py) and returned as OpenAI `tool_calls`.

Episodes: `open_episode(key, generate)` makes calls keyed by `key` (the path segment, or the bearer
token `Authorization: Bearer <key>`) go to that episode's own generate function and recorder
(recorder.py), so concurrent agents never mix. A call with no open episode's key is served by
`engine` unrecorded, or, when the server has no engine (an env manager's), refused with 401.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException

from roll.pipeline.agentic.llm_proxy import openai_responses as wire_out
from roll.pipeline.agentic.llm_proxy.openai_wire import ChatCompletionRequest, CompletionRequest, WireError, parse_body
from roll.pipeline.agentic.llm_proxy.prompt_ids import ChatRenderer, PromptIds, template_message
from roll.pipeline.agentic.llm_proxy.recorder import EpisodeRecorder
from roll.pipeline.agentic.llm_proxy.tool_calls import get_format, parser_for_template
from roll.strategies.generation import GenerationRequest, GenerationResult, SamplingParams

Generate = Callable[[list[GenerationRequest]], list[GenerationResult]]


@dataclass(frozen=True)
class SamplingDefaults:
    """What a request that leaves a field out gets. `max_tokens_cap` bounds what a request may ask
    (an env's per-turn budget); `max_context_tokens` bounds prompt + completion (a request whose
    prompt leaves no room is a 400 `context_length_exceeded`). The standalone defaults are the OpenAI
    API's own; an env manager passes the run's generating args."""

    max_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_tokens_cap: int | None = None
    max_context_tokens: int | None = None


def sampling_from_body(fields: Any, defaults: SamplingDefaults, prompt_len: int, choice: int, param: str) -> SamplingParams:
    """The sampling of choice `choice` of a parsed request body (`param`: the body's prompt field, named
    in a context-length error). Fields the body leaves out come from `defaults`."""
    limit = fields.token_limit() or defaults.max_tokens
    if defaults.max_tokens_cap:
        limit = min(limit, defaults.max_tokens_cap)
    if defaults.max_context_tokens:
        room = defaults.max_context_tokens - prompt_len
        if room < 1:
            raise WireError(f"{param}: the prompt has {prompt_len} tokens, which leaves no room in this server's "
                            f"context of {defaults.max_context_tokens} tokens", param=param,
                            code="context_length_exceeded")
        limit = min(limit, room)
    temperature = defaults.temperature if fields.temperature is None else fields.temperature
    # n choices of one prompt must not share a sampler seed, or they would be the same sample
    seed = fields.seed + choice if fields.seed is not None else random.getrandbits(62)
    return SamplingParams(max_new_tokens=int(limit), do_sample=temperature > 0, temperature=float(temperature),
                          top_p=float(defaults.top_p if fields.top_p is None else fields.top_p),
                          top_k=int(defaults.top_k if fields.top_k is None else fields.top_k),
                          stop_strings=fields.stop_strings(), seed=seed)


@dataclass
class EpisodeSession:
    key: str
    generate: Generate
    defaults: SamplingDefaults
    recorder: EpisodeRecorder = field(default_factory=EpisodeRecorder)


class OpenAIServer:
    def __init__(self, tokenizer: Any, engine: Any = None, model_name: str = "roll-policy",
                 tool_call_parser: str | None = None, defaults: SamplingDefaults = SamplingDefaults(),
                 max_threads: int = 256) -> None:
        self.tokenizer, self.model_name, self.defaults = tokenizer, model_name, defaults
        self.renderer = ChatRenderer(tokenizer)
        self.parse_tools = get_format(tool_call_parser or parser_for_template(tokenizer.chat_template)).parse
        self.engine_generate: Generate | None = engine.generate if engine is not None else None
        self.sessions: dict[str, EpisodeSession] = {}
        self.lock = threading.Lock()
        # generation blocks (an engine, a Ray call): it runs on these threads, not the event loop
        self.executor = ThreadPoolExecutor(max_workers=max_threads, thread_name_prefix="openai-server")
        self.app = self._build_app()
        self._server: uvicorn.Server | None = None
        self.host, self.port = "127.0.0.1", 0  # set by start()

    # ---- episodes ----
    def open_episode(self, key: str, generate: Generate, defaults: SamplingDefaults | None = None) -> EpisodeRecorder:
        with self.lock:
            if key in self.sessions:
                raise ValueError(f"episode key {key!r} is already open")
            session = self.sessions[key] = EpisodeSession(key, generate, defaults or self.defaults)
        return session.recorder

    def close_episode(self, key: str) -> EpisodeRecorder:
        """Ends the episode: later calls with its key are refused (a hung agent cannot add to it)."""
        with self.lock:
            return self.sessions.pop(key).recorder

    def episode_url(self, key: str) -> str:
        return f"{self.base_url.removesuffix('/v1')}/episodes/{key}/v1"

    # ---- lifecycle ----
    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self, host: str = "127.0.0.1", port: int = 0) -> "OpenAIServer":
        """Serves on a daemon thread; port 0 picks a free port (see `port`, `base_url`)."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        self.host, self.port = host, sock.getsockname()[1]
        config = uvicorn.Config(self.app, log_level="warning", lifespan="off", timeout_keep_alive=30, backlog=2048)
        self._server = uvicorn.Server(config)
        thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, name="openai-server", daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the OpenAI server did not start on {host}:{self.port}")
            time.sleep(0.01)
        self._thread = thread
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)
            self._server = None
        self.executor.shutdown(wait=False, cancel_futures=True)

    # ---- requests ----
    def _session(self, request: Request, path_key: str | None) -> EpisodeSession | None:
        auth = request.headers.get("authorization", "")
        key = path_key or (auth[7:].strip() if auth.lower().startswith("bearer ") else None)
        with self.lock:
            session = self.sessions.get(key) if key else None
        if session is None and (path_key is not None or self.engine_generate is None):
            raise WireError(f"no open episode has the key {key!r}: the episode ended, or the agent was not given "
                            "its episode's base_url / api_key", status=401, code="invalid_api_key")
        return session

    def _generate(self, session: EpisodeSession | None, fields: Any, prompt: PromptIds, param: str,
                  tools: list[dict] | None = None) -> list[GenerationResult]:
        defaults = session.defaults if session else self.defaults
        requests = [GenerationRequest(input_ids=list(prompt.ids), request_id=f"{session.key if session else 'anon'}-{i}",
                                      session_id=(f"{session.key}/{i}" if i else session.key) if session else None,
                                      sampling=sampling_from_body(fields, defaults, len(prompt.ids), i, param),
                                      tools=tools)
                    for i in range(fields.n)]
        generate = session.generate if session else self.engine_generate
        return generate(requests)

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def _completion(self, result: GenerationResult, fields: Any, parse: Any) -> wire_out.Completion:
        return wire_out.completion_from(list(result.output_ids), list(result.logprobs), result.finish_reason,
                                        self.tokenizer.eos_token_id, self._decode, fields.stop_strings(), parse)

    def chat(self, body: ChatCompletionRequest, session: EpisodeSession | None) -> dict:
        messages = [template_message(m.role, m.text(), [c.model_dump() for c in m.tool_calls or []],
                                     **{k: v for k, v in (("name", m.name), ("tool_call_id", m.tool_call_id)) if v})
                    for m in body.messages]
        tools = [t.model_dump(exclude_none=True) for t in body.tools] if body.tools else None
        replies = session.recorder.known_replies() if session else {}
        prompt = self.renderer.build(messages, tools, replies)
        parse = self.parse_tools if tools and body.tool_choice != "none" else None
        results = self._generate(session, body, prompt, "messages", tools if parse else None)
        choices = [self._completion(r, body, parse) for r in results]
        if session:
            for result, done in zip(results, choices):
                reply = template_message("assistant", done.content or "", done.tool_calls)
                ended_at_eos = result.finish_reason == "stop" and done.ids[-1:] == [self.tokenizer.eos_token_id]
                session.recorder.record(prompt, result, messages, reply, ended_at_eos)
        return wire_out.chat_response(body.model or self.model_name, prompt.ids, choices, body.logprobs, self._decode)

    def complete(self, body: CompletionRequest, session: EpisodeSession | None) -> dict:
        ids = list(body.prompt) if isinstance(body.prompt, list) else self.renderer.encode(body.prompt)
        prompt = PromptIds(ids=ids)
        results = self._generate(session, body, prompt, "prompt")
        choices = [self._completion(r, body, None) for r in results]
        if session:
            for result, done in zip(results, choices):
                reply = template_message("assistant", done.text)
                session.recorder.record(prompt, result, [], reply, result.output_ids[-1:] == [self.tokenizer.eos_token_id])
        return wire_out.text_response(body.model or self.model_name, ids, choices, body.logprobs is not None, self._decode)

    def _build_app(self) -> FastAPI:
        app = FastAPI(title="roll OpenAI-compatible server", docs_url=None, redoc_url=None, openapi_url=None)

        @app.exception_handler(WireError)
        async def wire_error(_: Request, exc: WireError) -> JSONResponse:
            return JSONResponse(exc.body(), status_code=exc.status)

        @app.exception_handler(HTTPException)
        async def http_error(_: Request, exc: HTTPException) -> JSONResponse:
            return JSONResponse(WireError(str(exc.detail), status=exc.status_code).body(), status_code=exc.status_code)

        @app.exception_handler(Exception)
        async def server_error(_: Request, exc: Exception) -> JSONResponse:
            body = WireError(f"{type(exc).__name__}: {exc}", status=500, kind="server_error").body()
            return JSONResponse(body, status_code=500)

        async def serve(request: Request, kind: str, path_key: str | None) -> Any:
            try:
                raw = await request.json()
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise WireError(f"the request body is not JSON: {exc}") from None
            body = parse_body(ChatCompletionRequest if kind == "chat" else CompletionRequest, raw)
            session = self._session(request, path_key)
            handler = self.chat if kind == "chat" else self.complete
            response = await asyncio.get_running_loop().run_in_executor(self.executor, handler, body, session)
            if not body.stream:
                return JSONResponse(response)
            usage = bool(body.stream_options and body.stream_options.include_usage)
            chunks = wire_out.chat_chunks if kind == "chat" else wire_out.text_chunks
            return StreamingResponse(chunks(response, usage), media_type="text/event-stream")

        def models() -> dict:
            return {"object": "list", "data": [{"id": self.model_name, "object": "model", "created": 0, "owned_by": "roll"}]}

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> Any:
            return await serve(request, "chat", None)

        @app.post("/episodes/{key}/v1/chat/completions")
        async def episode_chat(request: Request, key: str) -> Any:
            return await serve(request, "chat", key)

        @app.post("/v1/completions")
        async def completions(request: Request) -> Any:
            return await serve(request, "completions", None)

        @app.post("/episodes/{key}/v1/completions")
        async def episode_completions(request: Request, key: str) -> Any:
            return await serve(request, "completions", key)

        app.get("/v1/models")(models)
        app.get("/episodes/{key}/v1/models")(models)
        return app
