"""An agent written with the official `openai` client and tools, no roll imports: it walks a grid to a
goal by calling a `move` tool. roll trains whatever model answers its calls (docs/agents.md)."""

import json
import random

import openai

MOVES = {"Up": (-1, 0), "Down": (1, 0), "Left": (0, -1), "Right": (0, 1)}
MOVE_TOOL = {"type": "function", "function": {
    "name": "move", "description": "Take one step on the grid.",
    "parameters": {"type": "object", "properties": {"direction": {"type": "string", "enum": list(MOVES)}},
                   "required": ["direction"]}}}


def board(size, me, goal):
    return "\n".join(" ".join("P" if (r, c) == me else "G" if (r, c) == goal else "_" for c in range(size))
                     for r in range(size))


class GridAgent:
    def run_episode(self, seed, base_url, env_config):
        size, rng = 4, random.Random(seed)
        cells = [(r, c) for r in range(size) for c in range(size)]
        me, goal = rng.sample(cells, 2)
        client = openai.OpenAI(base_url=base_url, api_key="unused")
        messages = [{"role": "system", "content": "Walk P to G. Call the move tool once per turn, e.g. "
                                                  '<tool_call>{"name": "move", "arguments": {"direction": "Up"}}</tool_call>'},
                    {"role": "user", "content": board(size, me, goal)}]
        moved = 0
        for turns in range(1, env_config.max_steps + 1):
            reply = client.chat.completions.create(model="policy", messages=messages, tools=[MOVE_TOOL],
                                                   max_tokens=env_config.max_tokens_per_step).choices[0].message
            messages.append(reply.model_dump(exclude_none=True))
            if not reply.tool_calls:
                messages.append({"role": "user", "content": "Call the move tool."})
                continue
            moved += 1
            for call in reply.tool_calls:
                step = MOVES.get(json.loads(call.function.arguments).get("direction"), (0, 0))
                me = (min(max(me[0] + step[0], 0), size - 1), min(max(me[1] + step[1], 0), size - 1))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": board(size, me, goal)})
            if me == goal:
                break
        return {"score": float(me == goal), "metrics": {"success": float(me == goal), "moved": moved / turns}}
