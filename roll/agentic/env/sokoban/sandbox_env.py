"""``sokoban_sandbox``: ROLL's Sokoban served from a sandboxed process (ROLL runs it in a container
reached over its sandbox service; roll runs it in the tool env's namespace sandbox, reached over a
local Unix socket).

The game state lives in the server (sandbox_server.py), started on the env's first reset with no
network, a read-only file system and rlimits. This env parses the model's reply as every roll env
does (BaseEnv.step: format penalty, max_steps, describe_last_move) and sends only legal moves; each
answer brings back the state it renders. Same seed, same room and episode as ``sokoban``.
"""

from __future__ import annotations

import dataclasses
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import roll
from roll.agentic.env.base import BaseEnv, StepOutcome, config_error, require_int, require_number
from roll.agentic.env.sokoban.config import SokobanEnvConfig
from roll.agentic.env.sokoban.env import SokobanEnv
from roll.agentic.env.tool_use.sandbox import SandboxedServer, SandboxLimits

SERVER_CPU_SECONDS = 24 * 3600  # the server's CPU budget (rlimit): a game move costs microseconds
SERVER_MAIN = "import sys\nsys.path.insert(0, {root!r})\nfrom roll.agentic.env.sokoban.sandbox_server import serve\nserve()\n"


@dataclass
class SokobanSandboxConfig(SokobanEnvConfig):
    """Sokoban's keys, and: server_start_timeout (ROLL's key): seconds to wait for the server's first
    answer (it imports roll); request_timeout: seconds for each later one; sandbox_memory_mb: the
    server's address-space limit."""

    server_start_timeout: float = 60.0
    request_timeout: float = 30.0
    sandbox_memory_mb: int = 1024

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("server_start_timeout", "request_timeout"):
            require_number(getattr(self, name), name)
            if not getattr(self, name) > 0:
                raise config_error(name, f"must be > 0 seconds, got {getattr(self, name)}")
        require_int(self.sandbox_memory_mb, "sandbox_memory_mb", minimum=256)

    def game_values(self) -> dict[str, Any]:
        """The plain Sokoban config, as JSON values for the server."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(SokobanEnvConfig)}


class SokobanSandboxEnv(BaseEnv):
    config_cls = SokobanSandboxConfig
    config: SokobanSandboxConfig
    extra_metrics_agg_mode = SokobanEnv.extra_metrics_agg_mode
    idle_move_reward = SokobanEnv.idle_move_reward

    def __init__(self, config: Optional[SokobanSandboxConfig] = None, **config_kwargs: Any) -> None:
        super().__init__(config, **config_kwargs)
        self.server: Optional[SandboxedServer] = None
        self.state: dict[str, Any] = {}
        self._names = [self.config.action_lookup[k] for k in sorted(self.config.action_lookup)]

    def _start(self) -> None:
        root = str(Path(roll.__file__).resolve().parent.parent)
        limits = SandboxLimits(timeout_s=SERVER_CPU_SECONDS, memory_mb=self.config.sandbox_memory_mb)
        self.server = SandboxedServer(SERVER_MAIN.format(root=root), limits)
        self._ask({"op": "init", "config": self.config.game_values()}, self.config.server_start_timeout)

    def _ask(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        connection = self.server.connection
        connection.settimeout(timeout)
        connection.sendall((json.dumps(request) + "\n").encode())
        line = b""
        while not line.endswith(b"\n"):
            chunk = connection.recv(65536)
            if not chunk:
                raise RuntimeError(f"the sandboxed Sokoban server exited; its log ends: {self.server.log_tail()}")
            line += chunk
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"the sandboxed Sokoban server refused {request.get('op')!r}: {reply['error']}")
        return reply

    def _request(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.server is None:
            self._start()
        return self._ask(request, self.config.request_timeout)

    def _reset(self, rng: random.Random) -> None:
        # the episode's own seed: the server's SokobanEnv draws the same room as `sokoban` would
        self.state = self._request({"op": "reset", "seed": self.seed})["state"]

    def _apply(self, action: str) -> StepOutcome:
        reply = self._request({"op": "apply", "action": action})
        self.state = reply["state"]
        return StepOutcome(reward=reply["reward"], terminated=reply["terminated"], effective=reply["effective"],
                           info=reply["info"])

    def action_names(self) -> list[str]:
        return list(self._names)

    def render(self) -> str:
        return self.state["render"]

    def is_success(self) -> bool:
        return bool(self.state.get("success", False))

    def state_key(self) -> str:
        return self.state["state_key"]

    def state_metrics(self) -> dict[str, float]:
        return dict(self.state.get("state_metrics", {}))

    def default_instruction(self) -> str:
        return self.state["default_instruction"]

    def instruction_extras(self) -> str:
        return self.state["instruction_extras"]

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None
