"""Model resolution, tiny test models and the embedded SmolLM2-135M-Instruct."""

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from roll.models import EMBEDDED_MODEL_NAME, resolve_model_path
from roll.models.tiny import build_tiny_model

THREE_TURNS = [
    {"role": "system", "content": "You play FrozenLake."},
    {"role": "user", "content": "Turn 1: P _ _ G"},
    {"role": "assistant", "content": "<answer>Right</answer>"},
    {"role": "user", "content": "Turn 2: _ P _ G"},
    {"role": "assistant", "content": "<answer>Right</answer>"},
    {"role": "user", "content": "Turn 3: _ _ P G — héllo ✓"},
]


@pytest.mark.parametrize("arch, start, end", [("qwen2", "<|im_start|>", "<|im_end|>"), ("llama", "<|start_header_id|>", "<|eot_id|>")])
def test_tiny_model_renders_a_three_turn_conversation(tmp_path, arch, start, end):
    folder = build_tiny_model(tmp_path / arch, arch=arch)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    text = tokenizer.apply_chat_template(THREE_TURNS, tokenize=False, add_generation_prompt=True)
    for message in THREE_TURNS:
        assert message["content"] in text
    assert text.count(start) == len(THREE_TURNS) + 1  # one header per message plus the generation prompt
    assert text.count(end) == len(THREE_TURNS)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == text  # byte-level BPE: every character round-trips
    assert tokenizer.convert_tokens_to_ids(end) == tokenizer.eos_token_id


def test_tiny_model_round_trips_through_save_and_load(tmp_path):
    folder = build_tiny_model(tmp_path / "a", arch="qwen2")
    model = AutoModelForCausalLM.from_pretrained(folder)
    model.save_pretrained(tmp_path / "b")
    AutoTokenizer.from_pretrained(folder).save_pretrained(tmp_path / "b")
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "b")
    ids = torch.tensor([[5, 17, 42, 99, 3]])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, reloaded(ids).logits)
    assert AutoTokenizer.from_pretrained(tmp_path / "b").chat_template == AutoTokenizer.from_pretrained(folder).chat_template


def test_tiny_models_differ_by_seed(tmp_path):
    a = AutoModelForCausalLM.from_pretrained(build_tiny_model(tmp_path / "a", seed=0))
    b = AutoModelForCausalLM.from_pretrained(build_tiny_model(tmp_path / "b", seed=1))
    assert not torch.equal(a.lm_head.weight, b.lm_head.weight)


def test_local_folder_resolves_to_itself(tiny_model_dir):
    assert resolve_model_path(str(tiny_model_dir)) == str(tiny_model_dir.resolve())


def test_missing_path_says_what_to_give(tmp_path):
    with pytest.raises(FileNotFoundError, match=EMBEDDED_MODEL_NAME):
        resolve_model_path(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="config.json"):
        resolve_model_path(str(tmp_path / "empty"))


def test_embedded_model_answers_a_chat_prompt():
    folder = resolve_model_path(EMBEDDED_MODEL_NAME)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    assert tokenizer.eos_token == tokenizer.pad_token == "<|im_end|>"
    messages = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=12, do_sample=False)
    answer = tokenizer.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)
    assert "paris" in answer.lower()
