"""ROLL's other Sokoban forms: `sokoban_sandbox` (the game in a sandboxed server process, over a Unix
socket) plays exactly as `sokoban` does, from a process in its own network namespace; and
`sokoban_native_env` keeps the chat that AgentNativeStepEnvManager feeds the model."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from roll.agentic.env import make_env
from roll.agentic.env.sokoban.native_env import INVALID_REPLY_LINE
from roll.agentic.env.tool_use.sandbox import sandbox_unavailable_reason

SANDBOX_MISSING = sandbox_unavailable_reason()


def descendants(pid: int) -> list[int]:
    children = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


@pytest.mark.skipif(SANDBOX_MISSING is not None, reason=str(SANDBOX_MISSING))
def test_the_sandboxed_server_plays_the_same_episodes_as_sokoban():
    config = {"max_steps": 12, "format_penalty": -0.15, "describe_last_move": True, "dim_room": [7, 7], "num_boxes": 2}
    sandboxed, local = make_env("sokoban_sandbox", **config), make_env("sokoban", **config)
    rng = random.Random(0)
    try:
        for seed in (1, 2, 3):
            assert sandboxed.reset(seed) == local.reset(seed)
            for turn in range(12):
                reply = rng.choice(["<answer>Up</answer>", "<answer>Down</answer>", "<answer>Left</answer>",
                                    "<answer>Right</answer>", "no move"])
                got, want = sandboxed.step(reply), local.step(reply)
                assert got == want and sandboxed.state_key() == local.state_key()
                if got[2] or got[3]:
                    break
        server = sandboxed.server.process
        inner = descendants(server.pid)
        assert inner, "the server process tree is gone"
        namespaces = {os.readlink(f"/proc/{pid}/ns/net") for pid in inner}
        assert os.readlink("/proc/self/ns/net") not in namespaces  # no network of ours in there
    finally:
        sandboxed.close()
    assert server.poll() is not None  # close ended it


@pytest.mark.skipif(SANDBOX_MISSING is not None, reason=str(SANDBOX_MISSING))
def test_a_dead_server_fails_the_step_with_its_reason():
    env = make_env("sokoban_sandbox", max_steps=5)
    try:
        env.reset(4)
        env.server.connection.shutdown(2)  # as if the server had gone
        with pytest.raises((RuntimeError, OSError)):
            env.step("<answer>Up</answer>")
    finally:
        env.close()


def test_the_native_env_keeps_the_chat():
    env = make_env("sokoban_native_env", max_steps=10, format_penalty=-0.15, system_template="Play well.")
    observation, info = env.reset(5)
    messages = env.chat_messages()
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == f"Play well.\n\n{info['env_instruction']}"
    assert observation in messages[1]["content"] and "<answer>" in messages[1]["content"]
    second, *_ = env.step("<answer>Left</answer>")
    env.step("I am not sure")
    messages = env.chat_messages()
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert messages[2]["content"] == "<answer>Left</answer>" and second in messages[3]["content"]
    assert INVALID_REPLY_LINE not in messages[3]["content"] and messages[5]["content"].startswith(INVALID_REPLY_LINE)
    assert env.reset(5)[0] == observation and len(env.chat_messages()) == 2  # a new episode, a new chat
