"""The OpenAI wire format's request bodies, as pydantic models: a body is checked once, and a bad one
is answered with HTTP 400 naming the field (`error.param`), as OpenAI's own API does.

Fields roll cannot honour are refused by name instead of being ignored (a penalty, `logit_bias`,
`top_logprobs` > 0, a JSON `response_format`); fields that change nothing about generation
(`user`, `metadata`, `store`, `parallel_tool_calls`, ...) are accepted. Any other field is an error.
"""

from __future__ import annotations

import json
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator


class WireError(ValueError):
    """A request the server refuses: HTTP `status`, OpenAI error `type`, the offending `param`."""

    def __init__(self, message: str, param: str | None = None, status: int = 400,
                 kind: str = "invalid_request_error", code: str | None = None) -> None:
        super().__init__(message)
        self.param, self.status, self.kind, self.code = param, status, kind, code

    def body(self) -> dict:
        return {"error": {"message": str(self), "type": self.kind, "param": self.param, "code": self.code}}


def wire_error_from_validation(exc: ValidationError) -> WireError:
    first = exc.errors()[0]
    param = ".".join(str(p) for p in first["loc"]) or None
    return WireError(f"{param}: {first['msg']}" if param else first["msg"], param=param)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FunctionCall(_Strict):
    name: str
    arguments: str = "{}"  # a JSON object, as text (OpenAI's wire format)

    @field_validator("arguments")
    @classmethod
    def _json_object(cls, value: str) -> str:
        try:
            parsed = json.loads(value or "{}")
        except json.JSONDecodeError as exc:
            raise ValueError(f"arguments must be a JSON object as text: {exc}") from None
        if not isinstance(parsed, dict):
            raise ValueError("arguments must be a JSON object as text")
        return value or "{}"


class ToolCall(_Strict):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")  # frameworks add their own keys (refusal, audio: None)
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: Union[str, list[ContentPart], None] = None
    name: Optional[str] = None
    tool_calls: Optional[list[ToolCall]] = None
    tool_call_id: Optional[str] = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(part.text for part in self.content)
        return self.content or ""


class FunctionDef(BaseModel):
    model_config = ConfigDict(extra="allow")  # strict, ...
    name: str = Field(min_length=1)
    description: Optional[str] = None
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class Tool(_Strict):
    type: Literal["function"]
    function: FunctionDef


class NamedFunction(_Strict):
    name: str


class NamedToolChoice(_Strict):
    type: Literal["function"]
    function: NamedFunction


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


class SamplingFields(_Strict):
    """The sampling fields both endpoints share. None: the server's default (the run's generating
    args when an env manager serves it, else OpenAI's)."""

    model: Optional[str] = None
    n: int = Field(1, ge=1, le=64)
    stop: Union[str, list[str], None] = None
    max_tokens: Optional[int] = Field(None, ge=1)
    temperature: Optional[float] = Field(None, ge=0, le=2)
    top_p: Optional[float] = Field(None, gt=0, le=1)
    top_k: Optional[int] = Field(None, ge=0)  # vLLM's extension
    seed: Optional[int] = None
    stream: bool = False
    stream_options: Optional[StreamOptions] = None
    return_token_ids: Optional[bool] = None  # vLLM's flag; roll's server returns the ids always
    frequency_penalty: Optional[float] = None
    presence_penalty: Optional[float] = None
    logit_bias: Optional[dict[str, float]] = None
    user: Optional[str] = None
    metadata: Optional[dict[str, Any]] = None
    store: Optional[bool] = None
    service_tier: Optional[str] = None

    @model_validator(mode="after")
    def _refuse_what_roll_cannot_do(self) -> "SamplingFields":
        for name in ("frequency_penalty", "presence_penalty"):
            if getattr(self, name) not in (None, 0, 0.0):
                raise WireError(f"{name}: roll's samplers have no penalties; leave {name} unset or 0", param=name)
        if self.logit_bias:
            raise WireError("logit_bias: not supported by roll's samplers; leave it unset", param="logit_bias")
        return self

    def stop_strings(self) -> tuple[str, ...] | None:
        stops = [self.stop] if isinstance(self.stop, str) else (self.stop or [])
        return tuple(s for s in stops if s) or None


class ChatCompletionRequest(SamplingFields):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: Optional[int] = Field(None, ge=1)
    tools: Optional[list[Tool]] = None
    tool_choice: Union[Literal["none", "auto", "required"], NamedToolChoice, None] = None
    parallel_tool_calls: Optional[bool] = None
    logprobs: bool = False
    top_logprobs: Optional[int] = Field(None, ge=0, le=20)
    response_format: Optional[dict[str, Any]] = None
    reasoning_effort: Optional[str] = None
    prompt_cache_key: Optional[str] = None
    safety_identifier: Optional[str] = None

    @model_validator(mode="after")
    def _check_chat(self) -> "ChatCompletionRequest":
        if self.top_logprobs:
            raise WireError("top_logprobs: roll's engines return the sampled token's log-prob only; set top_logprobs "
                            "to 0 or leave it unset", param="top_logprobs")
        if self.response_format and self.response_format.get("type", "text") != "text":
            raise WireError("response_format: roll does not constrain decoding; only {'type': 'text'} is accepted",
                            param="response_format")
        if isinstance(self.tool_choice, NamedToolChoice):
            names = [t.function.name for t in self.tools or []]
            if self.tool_choice.function.name not in names:
                raise WireError(f"tool_choice: names {self.tool_choice.function.name!r}, which is not among tools {names}",
                                param="tool_choice")
        return self

    def token_limit(self) -> Optional[int]:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens


class CompletionRequest(SamplingFields):
    prompt: Union[str, list[int]]
    logprobs: Optional[int] = Field(None, ge=0, le=5)
    echo: bool = False
    best_of: Optional[int] = None
    suffix: Optional[str] = None

    @model_validator(mode="after")
    def _check_completion(self) -> "CompletionRequest":
        if isinstance(self.prompt, (str, list)) and len(self.prompt) == 0:
            raise WireError("prompt: must not be empty", param="prompt")
        if self.echo:
            raise WireError("echo: not supported; the response carries prompt_token_ids instead", param="echo")
        if self.best_of not in (None, 1):
            raise WireError("best_of: not supported; use n", param="best_of")
        if self.suffix:
            raise WireError("suffix: not supported (no fill-in-the-middle)", param="suffix")
        return self

    def token_limit(self) -> Optional[int]:
        return self.max_tokens


def parse_body(model: type[BaseModel], body: Any) -> Any:
    if not isinstance(body, dict):
        raise WireError("the request body must be a JSON object")
    try:
        return model.model_validate(body)
    except WireError:
        raise
    except ValidationError as exc:
        cause = next((e.get("ctx", {}).get("error") for e in exc.errors() if isinstance(e.get("ctx", {}).get("error"), WireError)), None)
        raise (cause or wire_error_from_validation(exc)) from None
