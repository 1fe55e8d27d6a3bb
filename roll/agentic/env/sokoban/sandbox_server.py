"""The Sokoban game server that ``sokoban_sandbox`` runs inside the sandbox (sandbox_env.py).

It speaks JSON lines on its stdin/stdout, which are a Unix socket to the env in roll's process:
``{"op": "init", "config": {...}}`` builds the game, ``{"op": "reset", "seed": n}`` starts a room and
``{"op": "apply", "action": "Up"}`` plays a legal move; each answer carries the state the client
shows (render, success, state key, metrics), or ``{"error": "..."}``.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any, Optional

from roll.agentic.env.sokoban.config import SokobanEnvConfig
from roll.agentic.env.sokoban.env import SokobanEnv


def snapshot(env: SokobanEnv) -> dict[str, Any]:
    return {"render": env.render(), "success": env.is_success(), "state_key": env.state_key(),
            "state_metrics": env.state_metrics(), "default_instruction": env.default_instruction(),
            "instruction_extras": env.instruction_extras()}


def handle(env: Optional[SokobanEnv], request: dict[str, Any]) -> tuple[Optional[SokobanEnv], dict[str, Any]]:
    op = request.get("op")
    if op == "init":
        return SokobanEnv(SokobanEnvConfig.from_values(request["config"], "sokoban")), {"ok": True}
    if env is None:
        raise RuntimeError(f"{op!r} before init")
    if op == "reset":
        env.reset(seed=int(request["seed"]))
        return env, {"state": snapshot(env)}
    if op == "apply":
        outcome = env._apply(request["action"])  # a legal move: the client parsed the reply (BaseEnv.step)
        return env, {"reward": outcome.reward, "terminated": outcome.terminated, "effective": outcome.effective,
                     "info": outcome.info, "state": snapshot(env)}
    raise ValueError(f"unknown op {op!r}")


def serve() -> None:
    connection = socket.socket(fileno=os.dup(0))
    os.dup2(2, 1)  # anything printed goes to the log, never into the protocol
    reader, writer = connection.makefile("r", encoding="utf-8"), connection.makefile("w", encoding="utf-8")
    env: Optional[SokobanEnv] = None
    for line in reader:
        try:
            env, reply = handle(env, json.loads(line))
        except Exception as exc:  # answered, so the client fails the episode with the reason
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        writer.write(json.dumps(reply) + "\n")
        writer.flush()
