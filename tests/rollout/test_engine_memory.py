"""The decode engine's memory is bounded by design: a KV cache of max_num_seqs × max_model_len tokens
allocated once and never grown, finished sessions' slots reused, requests that cannot fit refused,
and prefill's output layer run only where a token is sampled."""

from __future__ import annotations

import threading

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM

from roll.strategies.engine_budget import EngineBudget, with_config
from roll.strategies.generation import GenerationRequest, SamplingParams
from roll.strategies.hf_infer import HFInferStrategy
from roll.strategies.kv_forward import LeanForward


def _req(ids, n, session_id=None):
    sampling = SamplingParams(max_new_tokens=n, do_sample=False, temperature=0.0, top_p=1.0, top_k=0)
    return GenerationRequest(input_ids=ids, sampling=sampling, session_id=session_id)


def _episodes(strategy: HFInferStrategy, prompts: list[list[int]], turns: int) -> dict[int, list[list[int]]]:
    """Runs one multi-turn episode per prompt, all at once (a thread each, as env managers do)."""
    outputs: dict[int, list[list[int]]] = {}

    def episode(i: int) -> None:
        ids, outs = list(prompts[i]), []
        for turn in range(turns):
            result = strategy.generate([_req(ids, n=6, session_id=f"ep{i}")])[0]
            outs.append(result.output_ids)
            ids = ids + result.output_ids + [5 + turn, 7 + i]
        outputs[i] = outs
        strategy.release([f"ep{i}"])

    threads = [threading.Thread(target=episode, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outputs


def test_the_kv_cache_is_allocated_once_and_never_grows_past_its_budget(tiny_model_dir):
    cfg = AutoConfig.from_pretrained(tiny_model_dir)
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    slots, length = 3, 96
    budget = 2 * cfg.num_hidden_layers * slots * cfg.num_key_value_heads * length * head_dim * 4  # K and V, fp32
    small = HFInferStrategy(tiny_model_dir, max_sessions=slots, max_model_len=length)
    roomy = HFInferStrategy(tiny_model_dir, max_sessions=32, max_model_len=length)
    cache = small.engine.cache
    pointers = [t.data_ptr() for t in cache.k + cache.v]
    assert cache.nbytes() == budget
    tok = small.tokenizer
    prompts = [tok.encode(f"Episode {i}: Observation: _ _ O G") for i in range(10)]
    try:
        # 10 episodes of 3 turns at once, then 10 more: 3 slots serve 20 sessions (waiting and evicting)
        first = _episodes(small, prompts, turns=3)
        second = _episodes(small, [p + [9] for p in prompts], turns=3)
        reference = _episodes(roomy, prompts, turns=3)
    finally:
        small.shutdown()
        roomy.shutdown()
    assert [t.data_ptr() for t in cache.k + cache.v] == pointers  # never re-allocated
    assert cache.nbytes() == budget and len(cache.claimed) == slots
    assert all(t.shape == (slots, cfg.num_key_value_heads, length, head_dim) for t in cache.k + cache.v)
    assert len(second) == 10 and all(len(outs) == 3 for outs in second.values())
    # eviction and waiting change nothing in what is generated (greedy, tokens identical)
    assert first == reference


def test_a_request_that_cannot_fit_a_slot_is_refused_naming_the_key(tiny_model_dir):
    strategy = HFInferStrategy(tiny_model_dir, max_sessions=2, max_model_len=64)
    prompt = strategy.tokenizer.encode("Turn 1: Observation: _ _ O G")
    try:
        with pytest.raises(ValueError, match=r"over the decode engine's max_model_len 64 .*strategy_config.max_model_len"):
            strategy.generate([_req(prompt, n=64 - len(prompt) + 1)])
        fits = strategy.generate([_req(prompt, n=64 - len(prompt))])[0]  # exactly a slot: still served
    finally:
        strategy.shutdown()
    assert len(fits.output_ids) >= 1


def test_hf_infer_strategy_config_sets_the_budget_and_rejects_unknown_keys(tiny_model_dir):
    strategy = HFInferStrategy(tiny_model_dir, max_sessions=8, max_model_len=512,
                               strategy_config={"max_num_seqs": 2, "max_model_len": 80, "max_num_batched_tokens": 100})
    try:
        engine = strategy.engine
        assert (engine.max_sessions, engine.max_model_len, engine.max_prefill_tokens) == (2, 80, 100)
        assert engine.cache.k[0].shape[0] == 2 and engine.cache.k[0].shape[2] == 80
    finally:
        strategy.shutdown()
    with pytest.raises(ValueError, match=r"\['gpu_memory_utilization'\] are not hf_infer settings"):
        with_config(EngineBudget(), {"gpu_memory_utilization": 0.8})
    with pytest.raises(ValueError, match="max_num_seqs must be an integer >= 1"):
        with_config(EngineBudget(), {"max_num_seqs": 0})


def _lm_head_inputs(model: torch.nn.Module) -> tuple[list[tuple[int, ...]], torch.utils.hooks.RemovableHandle]:
    shapes: list[tuple[int, ...]] = []
    handle = model.lm_head.register_forward_hook(lambda module, args, out: shapes.append(tuple(out.shape)))
    return shapes, handle


def test_prefill_makes_logits_only_at_the_positions_it_samples(tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    vocab = model.config.vocab_size
    forward = LeanForward(model)
    cache = forward.new_cache(slots=3, capacity=1500)
    for slot in range(3):
        cache.claim(slot)
    torch.manual_seed(0)
    chunks = [(0, 0, torch.randint(0, vocab, (1400,)).tolist()), (1, 0, torch.randint(0, vocab, (900,)).tolist()),
              (2, 0, torch.randint(0, vocab, (7,)).tolist())]
    shapes, handle = _lm_head_inputs(model)
    logits = forward.prefill(cache, chunks)
    handle.remove()
    assert tuple(logits.shape) == (3, vocab)
    assert shapes == [(3, vocab)]  # one output-layer call over the 3 sampled positions, not 2,307 tokens
    # and they are the logits a full forward pass gives at each sequence's last token
    with torch.no_grad():
        for row, (_, _, ids) in enumerate(chunks):
            full = model(torch.tensor([ids])).logits[0, -1]
            assert torch.allclose(logits[row], full, atol=1e-4)


def test_the_fallback_path_also_keeps_only_the_last_positions_logits(tmp_path):
    from transformers import Qwen3Config

    from roll.models.tiny import build_tokenizer
    from roll.strategies.hf_cache_forward import HFCacheForward

    tok = build_tokenizer("qwen2")
    config = Qwen3Config(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).eval()
    forward = HFCacheForward(model)
    cache = forward.new_cache(slots=2, capacity=1024)
    shapes, handle = _lm_head_inputs(model)
    logits = forward.prefill(cache, [(0, 0, [i % 400 for i in range(800)]), (1, 0, list(range(5, 50)))])
    handle.remove()
    assert tuple(logits.shape) == (2, len(tok))
    assert shapes == [(1, 1, len(tok))] * 2  # per sequence, the last position only
