"""StepEnvManager: plays an episode turn by turn and returns one training sample per turn.

Select it per env with ``env_manager_cls: roll.pipeline.agentic.env_manager.step_env_manager.StepEnvManager``
(ROLL's config/step_envs.yaml does). Where TrajEnvManager grows one conversation over the whole
episode, here every turn starts a fresh two-message chat:

- system: ``agent_system_template``;
- user: ``agent_template`` filled with ROLL's step-wise fields {env_instruction}, {step_count} (turns
  done), {history_length} (pairs shown), {history} (the last ``history_length`` earlier
  (observation, reply) pairs), {current_step} (this turn, from 1), {current_observation} and
  {max_response_length}; the trajectory-wise fields {turn_idx} {observation} {actions_left} work
  too. A template without {env_instruction} gets the instruction on the line before it.

So the prompt stays short however long the episode, and each sample is exactly that turn's prompt
ids (the chat template's rendering, chat_tokens.py) followed by the ids the policy generated, with
the log-probs recorded at generation. Each sample carries `step_index` (the turn, from 0),
`state_key` (the env's ``state_key()`` before the turn's action: GiGPO's anchor state),
`step_rewards` and `actions` of the whole episode, and `score` = the episode's score (so episode
and step rewards stay apart: the step-level estimators read `step_rewards[step_index]` onwards).
`messages` is the sample's own chat. Every sample of an episode carries the episode's env metrics.

An episode ends as in TrajEnvManager; a turn whose prompt would not leave room for a response
token inside ``sequence_length`` ends it with stop_reason ``sequence_length``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from roll.agentic.env import make_env
from roll.pipeline.agentic.env_manager.traj_env_manager import TrajEnvManager
from roll.pipeline.agentic.trajectory import TokenBuffer, Trajectory

TEMPLATE_FIELDS = ("env_instruction", "step_count", "history_length", "history", "current_step",
                   "current_observation", "max_response_length", "turn_idx", "observation", "actions_left", "suffix")


class StepEnvManager(TrajEnvManager):
    """TrajEnvManager's constructor and env handling; one Trajectory per turn (module docstring)."""

    # the step-level estimators (gigpo, step_reinforce) need managers that set this (config validation)
    step_samples: ClassVar[bool] = True

    def history_text(self, pairs: list[tuple[int, str, str]]) -> str:
        """The {history} field: the earlier turns shown, each (turn number from 1, observation, reply)."""
        return "\n".join(f"[step {turn}] observation:\n{observation}\nyour response: {reply}"
                         for turn, observation, reply in pairs)

    def _step_prompt(self, instruction: str, observation: str, turn: int, history: list[tuple[int, str, str]]) -> str:
        shown = history[len(history) - self.spec.history_length:] if self.spec.history_length else []
        values = {
            "env_instruction": instruction, "step_count": turn, "history_length": len(shown),
            "history": self.history_text(shown), "current_step": turn + 1, "current_observation": observation,
            "max_response_length": self.spec.max_tokens_per_step, "turn_idx": turn + 1, "observation": observation,
            "actions_left": self.spec.max_steps - turn, "suffix": "",  # as in TrajEnvManager._prompt
        }
        try:
            text = self.spec.agent_template.format(**values)
        except (KeyError, IndexError) as exc:
            raise ValueError(f"custom_envs.{self.tag}.agent_template uses an unknown field {exc}; a step-wise "
                             f"template may use {' '.join('{' + f + '}' for f in TEMPLATE_FIELDS)}") from None
        if instruction and "{env_instruction}" not in self.spec.agent_template:
            text = instruction + "\n" + text
        return text

    def turn_messages(self, instruction: str, observation: str, turn: int,
                      history: list[tuple[int, str, str]]) -> list[dict[str, str]]:
        """The chat of one turn: system, and the step prompt (module docstring)."""
        return [{"role": "system", "content": self.spec.agent_system_template},
                {"role": "user", "content": self._step_prompt(instruction, observation, turn, history)}]

    def first_messages(self, instruction: str, observation: str) -> list[dict[str, str]]:
        return self.turn_messages(instruction, observation, 0, [])

    def run_episode(self, seed: int, episode_key: str = "0") -> list[Trajectory]:
        """Plays one episode from `seed`; returns one Trajectory per turn played."""
        if self.env is None:
            self.env = self._env_call("make_env", seed, lambda: make_env(self.spec.env_type, **self.env_kwargs))
        observation, info = self._env_call("reset", seed, self.env.reset, seed)
        instruction = self.spec.env_instruction or info.get("env_instruction", "")
        session_id = f"{self.session_prefix}-{episode_key}"
        turns: list[dict[str, Any]] = []  # per turn: tokens, messages, state_key, generated
        history: list[tuple[int, str, str]] = []
        steps = self._episode_steps()
        stop_reason = "max_steps"
        try:
            for turn in range(self.spec.max_steps):
                chat = self._new_chat()
                prompt_ids = chat.start(self.turn_messages(instruction, observation, turn, history))
                if len(prompt_ids) >= self.sequence_length:
                    if turn == 0:
                        raise ValueError(f"the first prompt of env {self.tag} has {len(prompt_ids)} tokens, not below "
                                         f"sequence_length={self.sequence_length}")
                    stop_reason = "sequence_length"
                    break
                state_key = self._state_key(seed)
                max_new = min(self.spec.max_tokens_per_step, self.sequence_length - len(prompt_ids))
                request = self._request(session_id, prompt_ids, max_new, chat.messages, seed, turn)
                result, text = self._generate_reply(chat, request, seed)
                steps.count_reply(result)
                tokens = TokenBuffer()
                tokens.add_prompt(prompt_ids)
                tokens.add_response(result.output_ids, result.logprobs, result.weight_version)
                turns.append({"tokens": tokens, "messages": chat.messages, "state_key": state_key,
                              "generated": len(result.output_ids)})
                history.append((turn + 1, observation, text))
                observation, info, ended = self._play(seed, text, steps)
                if ended:
                    stop_reason = ended
                    break
        finally:
            self.proxy.release(session_id)
        metrics = steps.episode_metrics()
        return [Trajectory.from_tokens(
            t["tokens"], score=float(sum(steps.rewards)), step_rewards=list(steps.rewards), actions=list(steps.actions),
            messages=t["messages"], env_metrics=dict(metrics), tag=self.tag, env_seed=seed, stop_reason=stop_reason,
            generated_tokens=t["generated"], step_index=i, state_key=t["state_key"],
            random_turns=None if steps.random_turns is None else list(steps.random_turns),
        ) for i, t in enumerate(turns)]
