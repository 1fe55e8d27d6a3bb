"""Token ids of a conversation whose user messages hold images (vision-language agents).

`VisionChatTokens` keeps ChatTokens' rule (the template renders text, model replies enter as the
exact ids generated) and adds images: a message's content may be a list of parts, `{"type": "text",
"text": ...}` and `{"type": "image", "image": <RGB array>}`. The chat template renders an image part
as its placeholder (Qwen2.5-VL: `<|vision_start|><|image_pad|><|vision_end|>`); the model's image
processor turns the image into patches and a grid, and the one placeholder token becomes as many as
the image has merged patches, as Qwen2.5-VL's processor expands it. The stored messages keep
`{"type": "image"}` without the pixels (they are meta, saved as JSON); the pixels live in `images`,
one `VisionInputs` per image in the order of their placeholders in the ids.
"""

from __future__ import annotations

from typing import Any

from roll.data.vision import VisionInputs, cat_vision
from roll.models.vision import image_placeholder_count
from roll.pipeline.agentic.env_manager.chat_tokens import ChatTemplateError, ChatTokens

DEFAULT_IMAGE_TOKEN = "<|image_pad|>"  # Qwen2-VL / Qwen2.5-VL


class VisionChatTokens(ChatTokens):
    def __init__(self, tokenizer: Any, image_processor: Any) -> None:
        super().__init__(tokenizer)
        self.image_processor = image_processor
        self.image_token_id = tokenizer.convert_tokens_to_ids(getattr(tokenizer, "image_token", None) or DEFAULT_IMAGE_TOKEN)
        self.images: list[VisionInputs] = []
        self._queued: list[Any] = []  # images of the message being encoded, in order
        self._turn_images = 0  # images the last start / next_prompt added (drop_last_user removes them)

    def start(self, messages: list[dict[str, Any]]) -> list[int]:
        self.images, self._turn_images = [], 0
        ids = super().start(self._hold_images(messages))
        self._all_placed()
        return ids

    def next_prompt(self, content: Any) -> list[int]:
        """Ids for the next user message (a string, or a list of text and image parts) plus the assistant header."""
        [message] = self._hold_images([{"role": "user", "content": content}])
        self._turn_images = 0
        ids = super().next_prompt(message["content"])
        self._all_placed()
        return ids

    def drop_last_user(self) -> None:
        if self.messages and self.messages[-1]["role"] == "user":
            del self.images[len(self.images) - self._turn_images:]
        super().drop_last_user()

    def vision(self) -> VisionInputs | None:
        """Every image of the conversation so far, in the order of their placeholders."""
        return cat_vision(self.images)

    def encode(self, text: str) -> list[int]:
        ids = super().encode(text)
        out: list[int] = []
        for token in ids:
            if token != self.image_token_id:
                out.append(token)
                continue
            if not self._queued:
                raise ChatTemplateError("the chat template rendered more image placeholders than the messages hold images")
            processed = self.image_processor(images=[self._queued.pop(0)], return_tensors="pt")
            image = VisionInputs(processed["pixel_values"], processed["image_grid_thw"])
            self.images.append(image)
            self._turn_images += 1
            out.extend([token] * image_placeholder_count(image.image_grid_thw[0], self.image_processor.merge_size))
        return out

    def _hold_images(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The messages with each image part's pixels taken out (queued for `encode`, in order)."""
        held = []
        for message in messages:
            content = message["content"]
            if isinstance(content, list):
                self._queued.extend(part["image"] for part in content if part.get("type") == "image")
                content = [{"type": "image"} if part.get("type") == "image" else part for part in content]
            held.append({**message, "content": content})
        return held

    def _all_placed(self) -> None:
        if self._queued:
            self._queued.clear()
            raise ChatTemplateError("the chat template rendered fewer image placeholders than the messages hold images: "
                                    "it does not show image parts (use the vision-language model's own template)")
