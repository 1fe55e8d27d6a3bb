"""ToolCallRunner: a roll env whose actions are OpenAI tools (ROLL's ToolCallRunner).

A grid env's moves (Sokoban, FrozenLake: Up/Down/Left/Right) become one tool `move(direction)`, as
ROLL's sokoban tool-call env has it; other envs get `act(action)` with their action names. The agent
sees the env instruction and board, calls the tool, and gets the next board back as the tool's
answer; a reply with no tool call goes to the env as text (so the env's format penalty applies).
"""

from __future__ import annotations

import json

import openai

from roll.pipeline.agentic.agent_runner.base import AgentRunner, EnvPlay, EpisodeResult, out_of_context
from roll.configs.agentic_config import CustomEnvConfig

DIRECTIONS = {"Up", "Down", "Left", "Right"}


def action_tool(action_names: list[str]) -> tuple[dict, str]:
    """The env's actions as one OpenAI tool, and the name of its argument."""
    name, arg = ("move", "direction") if set(action_names) <= DIRECTIONS else ("act", "action")
    return {"type": "function", "function": {
        "name": name, "description": f"Play one action in the game: one of {', '.join(action_names)}.",
        "parameters": {"type": "object", "properties": {arg: {"type": "string", "enum": list(action_names)}},
                       "required": [arg]}}}, arg


class ToolCallRunner(AgentRunner):
    plays_roll_env = True

    def run_episode(self, seed: int, base_url: str, env_config: CustomEnvConfig) -> EpisodeResult:
        client = openai.OpenAI(base_url=base_url, api_key="roll", max_retries=0)
        play = EnvPlay.make(env_config)
        try:
            observation, info = play.env.reset(seed)
            tool, arg = action_tool(play.env.action_names())
            instruction = env_config.env_instruction or info.get("env_instruction", "")
            messages = [{"role": "system", "content": env_config.agent_system_template},
                        {"role": "user", "content": f"{instruction}\n{observation}\nCall the {tool['function']['name']} tool "
                                                    "with your next action."}]
            for _ in range(env_config.max_steps):
                try:
                    reply = client.chat.completions.create(model="policy", messages=messages, tools=[tool],
                                                           max_tokens=env_config.max_tokens_per_step).choices[0].message
                except openai.BadRequestError as exc:
                    if not out_of_context(exc):
                        raise
                    play.stop_reason = "sequence_length"
                    break
                messages.append(reply.model_dump(exclude_none=True))
                calls = reply.tool_calls or []
                if not calls:
                    observation, over = play.step(reply.content or "")
                    messages.append({"role": "user", "content": observation})
                else:
                    action = json.loads(calls[0].function.arguments).get(arg, "")
                    observation, over = play.step(play.env.format_answer(str(action)))
                    messages.append({"role": "tool", "tool_call_id": calls[0].id, "content": observation})
                    # only the first call is played: the others get told so, so the chat stays well formed
                    messages += [{"role": "tool", "tool_call_id": c.id, "content": "Ignored: one action per turn."}
                                 for c in calls[1:]]
                if over:
                    break
        finally:
            play.env.close()
        return play.result()
