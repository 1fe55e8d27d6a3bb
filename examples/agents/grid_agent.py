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


def observe(size, me, goal):
    """The board, and where the goal lies from the player in words (what a small model reads best)."""
    rows = [" ".join("P" if (r, c) == me else "G" if (r, c) == goal else "_" for c in range(size)) for r in range(size)]
    down, right, where = goal[0] - me[0], goal[1] - me[1], []
    if down:
        where.append(f"{abs(down)} {'Down' if down > 0 else 'Up'}")
    if right:
        where.append(f"{abs(right)} {'Right' if right > 0 else 'Left'}")
    return "\n".join(rows) + f"\nG is {' and '.join(where) or 'here'}."


class GridAgent:
    def run_episode(self, seed, base_url, env_config):
        size, rng = 4, random.Random(seed)
        me, goal = rng.sample([(r, c) for r in range(size) for c in range(size)], 2)
        client = openai.OpenAI(base_url=base_url, api_key="unused")
        messages = [{"role": "system", "content": "Walk P to G. Call the move tool once per turn, e.g. "
                                                  '<tool_call>{"name": "move", "arguments": {"direction": "Up"}}</tool_call>'},
                    {"role": "user", "content": observe(size, me, goal)}]
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
                messages.append({"role": "tool", "tool_call_id": call.id, "content": observe(size, me, goal)})
            if me == goal:
                break
        distance = abs(goal[0] - me[0]) + abs(goal[1] - me[1])
        # the score trains (1 at the goal, less the farther it ended); success is what we report
        return {"score": float(me == goal) - distance / (2 * size),
                "metrics": {"success": float(me == goal), "moved": moved / turns}}
