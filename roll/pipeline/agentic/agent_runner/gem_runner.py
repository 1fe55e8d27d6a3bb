"""GEMRunner: a roll env played through chat, at the class path ROLL's agent-runner YAML names.

The agent is the plainest one: the conversation ROLL's trajectory manager builds (the system template,
the env instruction and each observation in `agent_template`), sent to the endpoint with the official
`openai` client; each reply's text goes to the env. Because every call repeats the earlier replies as
they came back, the recorder joins the episode into one multi-turn sample.
"""

from __future__ import annotations

import openai

from roll.pipeline.agentic.agent_runner.base import AgentRunner, EnvPlay, EpisodeResult, out_of_context
from roll.configs.agentic_config import CustomEnvConfig


def turn_prompt(env_config: CustomEnvConfig, observation: str, turn: int) -> str:
    return env_config.agent_template.format(turn_idx=turn + 1, observation=observation, suffix="",
                                            actions_left=env_config.max_steps - turn,
                                            max_response_length=env_config.max_tokens_per_step)


class GEMRunner(AgentRunner):
    plays_roll_env = True

    def run_episode(self, seed: int, base_url: str, env_config: CustomEnvConfig) -> EpisodeResult:
        client = openai.OpenAI(base_url=base_url, api_key="roll", max_retries=0)
        play = EnvPlay.make(env_config)
        try:
            observation, info = play.env.reset(seed)
            instruction = env_config.env_instruction or info.get("env_instruction", "")
            messages = [{"role": "system", "content": env_config.agent_system_template},
                        {"role": "user", "content": (instruction + "\n" if instruction else "") + turn_prompt(env_config, observation, 0)}]
            for turn in range(env_config.max_steps):
                try:
                    reply = client.chat.completions.create(model="policy", messages=messages,
                                                           max_tokens=env_config.max_tokens_per_step)
                except openai.BadRequestError as exc:
                    if not out_of_context(exc):
                        raise
                    play.stop_reason = "sequence_length"
                    break
                text = reply.choices[0].message.content or ""
                messages.append({"role": "assistant", "content": text})
                observation, over = play.step(text)
                if over:
                    break
                messages.append({"role": "user", "content": turn_prompt(env_config, observation, turn + 1)})
        finally:
            play.env.close()
        return play.result()
