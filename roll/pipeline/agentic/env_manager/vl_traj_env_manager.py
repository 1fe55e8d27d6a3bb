"""VLTrajEnvManager (ROLL's class path): TrajEnvManager for envs that observe images.

An env with `render_mode: rgb_array` returns its board as an RGB image. Each turn's user message is
`agent_template` with the image where `{observation}` stands (text before it, the image, text after
it; after the text when the template has no `{observation}`), so the prompt reads like the text
manager's with a picture in place of the board. A text observation stays text. The model's image
processor turns each image into patches and the chat's ids hold its expanded placeholder tokens
(vision_chat.py); each generation request carries every image of the conversation so far, and the
episode's Trajectory carries them all (`Trajectory.vision`), so the trainer scores exactly the ids
and images the policy saw. Needs a vision-language model (Qwen2.5-VL; `tiny-random-qwen2.5-vl` for
a smoke test) and an inference strategy that takes images (hf_infer).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from roll.models.vision import load_image_processor
from roll.pipeline.agentic.env_manager.traj_env_manager import TrajEnvManager
from roll.pipeline.agentic.env_manager.vision_chat import VisionChatTokens
from roll.pipeline.agentic.trajectory import Trajectory
from roll.strategies.generation import GenerationRequest

_IMAGE_SLOT = "\x00roll-image\x00"  # stands for the image while agent_template is filled in


class VLTrajEnvManager(TrajEnvManager):
    image_observations = True  # validation: envs with render_mode rgb_array need a manager that shows images

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        try:
            self.image_processor = load_image_processor(self.tokenizer.name_or_path)
        except (FileNotFoundError, OSError, ValueError) as exc:
            raise ValueError(
                f"custom_envs.{self.tag}.env_manager_cls: VLTrajEnvManager shows image observations to a "
                f"vision-language model, and the model has no image processor ({exc}). Set pretrain to one "
                f"(Qwen/Qwen2.5-VL-3B-Instruct; tiny-random-qwen2.5-vl for a smoke test)") from None
        self._chat: VisionChatTokens | None = None

    def _content(self, observation: Any, turn: int, prefix: str = "") -> Any:
        """The user message of a turn: text for a text observation, else text and image parts."""
        if isinstance(observation, str):
            return prefix + self._prompt(observation, turn)
        text = prefix + self._prompt(_IMAGE_SLOT, turn)
        before, _, after = text.partition(_IMAGE_SLOT)
        parts = [{"type": "text", "text": before}] if before else []
        parts.append({"type": "image", "image": observation})
        return parts + ([{"type": "text", "text": after}] if after else [])

    def _new_chat(self) -> VisionChatTokens:
        self._chat = VisionChatTokens(self.tokenizer, self.image_processor)
        return self._chat

    def first_messages(self, instruction: str, observation: Any) -> list[dict[str, Any]]:
        return [{"role": "system", "content": self.spec.agent_system_template},
                {"role": "user", "content": self._content(observation, 0, instruction + "\n" if instruction else "")}]

    def _next_turn_ids(self, chat: VisionChatTokens, observation: Any, info: dict, turn: int) -> list[int]:
        return chat.next_prompt(self._content(observation, turn))

    def _request(self, *args: Any, **kwargs: Any) -> GenerationRequest:
        return dataclasses.replace(super()._request(*args, **kwargs), vision=self._chat.vision())

    def run_episode(self, seed: int, episode_key: str = "0") -> list[Trajectory]:
        samples = super().run_episode(seed, episode_key)
        for sample in samples:
            sample.vision = self._chat.vision()
        return samples
