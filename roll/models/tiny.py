"""Tiny random models for tests and debugging: nothing is downloaded.

`build_tiny_model(dir, arch="qwen2"|"llama"|"qwen2_5_vl")` writes a Hugging Face folder with a randomly
initialised causal LM of a few hundred thousand parameters and a byte-level BPE tokenizer trained here on
a small corpus (so any text, unicode included, encodes), with a chat template:
- "qwen2": ChatML (`<|im_start|>role\\n…<|im_end|>\\n`), eos = pad = `<|im_end|>` (Qwen, SmolLM2).
- "llama": Llama-3 style headers (`<|start_header_id|>role<|end_header_id|>\\n\\n…<|eot_id|>`).
- "qwen2_5_vl": a Qwen2.5-VL (vision tower + language model with 3-D rope) with the ChatML tokenizer plus
  Qwen's vision tokens, a template that renders an image part as `<|vision_start|><|image_pad|><|vision_end|>`,
  and Qwen2-VL's image processor (14-pixel patches merged 2x2; images scaled to at most 112x112 pixels,
  so a board image costs a few dozen tokens).

By name, `pretrain=tiny-random-qwen2` (or `tiny-random-llama`, `tiny-random-qwen2.5-vl`) builds one once
into the cache folder (`prepare_tiny_model`), so any config can be smoke-tested in a minute without a
download.
"""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoModelForCausalLM, LlamaConfig, PreTrainedTokenizerFast, Qwen2Config

from roll.models.embedded import CHATML_TEMPLATE, build_model_folder_once, cache_root  # the same ChatML as the embedded SmolLM2

LLAMA3_TEMPLATE = (
    "{{ '<|begin_of_text|>' }}"
    "{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] + '<|eot_id|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)

# ChatML whose message content may also be a list of parts ({"type": "text", "text"} / {"type": "image"}),
# as Qwen2.5-VL's own template renders them
VL_CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}{{ '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{% else %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}{{ '<|im_end|>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
VISION_TOKENS = ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]

_SPECIALS = {
    "qwen2": dict(tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], eos="<|im_end|>", pad="<|im_end|>", bos=None, template=CHATML_TEMPLATE),
    "llama": dict(
        tokens=["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|finetune_pad|>"],
        eos="<|eot_id|>", pad="<|finetune_pad|>", bos="<|begin_of_text|>", template=LLAMA3_TEMPLATE,
    ),
    "qwen2_5_vl": dict(tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>", *VISION_TOKENS], eos="<|im_end|>",
                       pad="<|im_end|>", bos=None, template=VL_CHATML_TEMPLATE),
}

# Enough English and game vocabulary that common words become single tokens, like a real tokenizer.
_CORPUS = [
    "You are a helpful assistant. You are a good game player. Decide the next action.",
    "<answer>Left</answer> <answer>Right</answer> <answer>Up</answer> <answer>Down</answer>",
    "<think>I should move towards the goal.</think><answer>Down</answer>",
    "Turn 1: Observation: _ _ O G\nP _ _ _\nStrictly follow this format. You have 3 actions left.",
    "FrozenLake Sokoban box target wall player hole goal frozen ice reward success",
    "The quick brown fox jumps over the lazy dog. 0123456789 + - * / ( ) = < > ! ? . , ; :",
]


def build_tokenizer(arch: str = "qwen2", vocab_size: int = 512) -> PreTrainedTokenizerFast:
    spec = _SPECIALS[arch]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=spec["tokens"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=spec["eos"],
        pad_token=spec["pad"],
        bos_token=spec["bos"],
        additional_special_tokens=[t for t in spec["tokens"] if t not in (spec["eos"], spec["pad"], spec["bos"])],
    )
    fast.chat_template = spec["template"]
    return fast


def build_tiny_model(
    output_dir: str | Path,
    arch: str = "qwen2",
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    seed: int = 0,
) -> Path:
    """Writes a tiny random causal LM and its tokenizer to `output_dir`; returns the folder."""
    if arch not in _SPECIALS:
        raise ValueError(f"arch must be one of {sorted(_SPECIALS)}, got {arch!r}")
    output_dir = Path(output_dir)
    tokenizer = build_tokenizer(arch)
    if arch == "qwen2_5_vl":
        return _build_tiny_vl_model(output_dir, tokenizer, hidden_size, num_layers, num_heads, num_kv_heads, seed)
    config_cls = Qwen2Config if arch == "qwen2" else LlamaConfig
    config = config_cls(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        max_position_embeddings=4096,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        tie_word_embeddings=False,
    )
    return _save_random_model(AutoModelForCausalLM, config, tokenizer, output_dir, seed)


def _save_random_model(auto_class, config, tokenizer: PreTrainedTokenizerFast, output_dir: Path, seed: int) -> Path:
    """A model of `config` with seeded random weights, saved with its tokenizer to `output_dir`."""
    torch.manual_seed(seed)
    model = auto_class.from_config(config, dtype=torch.float32)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)
    return output_dir


def _build_tiny_vl_model(output_dir: Path, tokenizer: PreTrainedTokenizerFast, hidden_size: int, num_layers: int,
                         num_heads: int, num_kv_heads: int, seed: int) -> Path:
    # imported here: the launcher imports this module, and most runs never build a vision model
    from transformers import AutoModelForImageTextToText, Qwen2_5_VLConfig, Qwen2VLImageProcessorPil

    ids = {name: tokenizer.convert_tokens_to_ids(token) for name, token in (
        ("vision_start_token_id", "<|vision_start|>"), ("vision_end_token_id", "<|vision_end|>"),
        ("image_token_id", "<|image_pad|>"), ("video_token_id", "<|video_pad|>"))}
    half_head = hidden_size // num_heads // 2
    text = dict(
        vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers, num_attention_heads=num_heads, num_key_value_heads=num_kv_heads,
        max_position_embeddings=4096, tie_word_embeddings=False, bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        # the (temporal, height, width) split of the rotary frequencies, scaled down from Qwen's [16, 24, 24]
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0,
                         "mrope_section": [half_head - 2 * (3 * half_head // 8), 3 * half_head // 8, 3 * half_head // 8]},
    )
    vision = dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=hidden_size, patch_size=14,
                  spatial_merge_size=2, temporal_patch_size=2, window_size=56, fullatt_block_indexes=[1])
    config = Qwen2_5_VLConfig(text_config=text, vision_config=vision, eos_token_id=tokenizer.eos_token_id,
                              pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False, **ids)
    _save_random_model(AutoModelForImageTextToText, config, tokenizer, output_dir, seed)
    Qwen2VLImageProcessorPil(min_pixels=56 * 56, max_pixels=112 * 112, patch_size=14, merge_size=2,
                             temporal_patch_size=2).save_pretrained(output_dir)
    return output_dir


TINY_VL_MODEL_NAME = "tiny-random-qwen2.5-vl"
TINY_MODEL_NAMES = {"tiny-random-qwen2": "qwen2", "tiny-random-llama": "llama", TINY_VL_MODEL_NAME: "qwen2_5_vl"}


def prepare_tiny_model(name: str, cache_dir: str | Path | None = None) -> Path:
    """The folder of the tiny random model `name` (see TINY_MODEL_NAMES), built on first use (seed 0)."""
    if name not in TINY_MODEL_NAMES:
        raise ValueError(f"unknown tiny model {name!r}; known: {', '.join(TINY_MODEL_NAMES)}")
    target = Path(cache_dir or cache_root() / "models") / name
    return build_model_folder_once(target, lambda folder: build_tiny_model(folder, arch=TINY_MODEL_NAMES[name]))
