"""Token ids of a multi-turn conversation, built incrementally and never re-tokenising model output.

The chat template is rendered to text for the prompt parts only: each turn, the text the template
adds after the model's response (its turn-closing string, the next user message, the next assistant
header) is tokenised on its own and appended to the ids. The model's response enters as the exact
ids it generated. So `decode(ids)` is the template's rendering of the conversation, and the policy
is trained on exactly what it saw and produced (docs/rollout.md, "Exact tokens").
"""

from __future__ import annotations

from typing import Any


_PROBE = "x7"  # content that no template trims or escapes


class ChatTemplateError(ValueError):
    pass


class ChatTokens:
    """One episode's conversation as ids. Call `start(messages)`, then per turn `add_response(...)`
    and `next_prompt(user_text)`."""

    def __init__(self, tokenizer: Any) -> None:
        if not getattr(tokenizer, "chat_template", None):
            raise ChatTemplateError("the tokenizer has no chat_template; roll formats agent turns with the model's own template")
        self.tokenizer = tokenizer
        self.messages: list[dict[str, str]] = []
        self._pending_close = ""  # template text owed after the last response, sent with the next prompt

    def render(self, messages: list[dict[str, str]], generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def start(self, messages: list[dict[str, str]]) -> list[int]:
        self.messages = list(messages)
        return self.encode(self.render(self.messages, generation_prompt=True))

    def add_response(self, output_ids: list[int], stopped_at_eos: bool) -> str:
        """Records the model's ids as the assistant message; returns its text (what the env gets)."""
        content_ids = output_ids[:-1] if stopped_at_eos else output_ids
        content = self.decode(content_ids)
        # The template's closing of an assistant turn, found with a probe message: templates that trim
        # or escape content (Llama-3's official one trims) still reveal what they put after it.
        prefix = self.render(self.messages, generation_prompt=True)
        probe = self.render(self.messages + [{"role": "assistant", "content": _PROBE}], generation_prompt=False)
        if not probe.startswith(prefix + _PROBE):
            raise ChatTemplateError(
                "the chat template does not render an assistant turn as the generation prompt + content + "
                "closing text, so the trajectory ids could not match the conversation"
            )
        close = probe[len(prefix) + len(_PROBE):]
        self.messages.append({"role": "assistant", "content": content})
        eos_text = self.decode(output_ids[-1:]) if stopped_at_eos else ""
        # the generated eos usually is the template's closing token: do not add it twice
        self._pending_close = close[len(eos_text):] if eos_text and close.startswith(eos_text) else close
        return content

    def next_prompt(self, user_text: str) -> list[int]:
        """Ids to append for the next user message plus the assistant header."""
        before = self.render(self.messages, generation_prompt=False)
        self.messages.append({"role": "user", "content": user_text})
        after = self.render(self.messages, generation_prompt=True)
        if not after.startswith(before):
            raise ChatTemplateError("the chat template changes earlier turns when a message is added; multi-turn token ids cannot be kept exact")
        delta = self._pending_close + after[len(before):]
        self._pending_close = ""
        return self.encode(delta)

    def drop_last_user(self) -> None:
        """Undo `next_prompt` (used when the new prompt would not fit in sequence_length)."""
        if self.messages and self.messages[-1]["role"] == "user":
            self.messages.pop()
