"""The decode engine: batched = sequential = transformers' greedy generate; KV reuse between turns;
weight updates; sampling and stop rules."""

from __future__ import annotations

import threading

import torch
from transformers import AutoModelForCausalLM

from roll.strategies.generation import GenerationRequest, SamplingParams
from roll.strategies.hf_infer import HFInferStrategy
from roll.strategies.sampling import sample_tokens


def _params(n=10, do_sample=False, temperature=0.0, top_p=1.0, top_k=0, **kw) -> SamplingParams:
    return SamplingParams(max_new_tokens=n, do_sample=do_sample, temperature=temperature, top_p=top_p, top_k=top_k, **kw)


def _req(ids, n=10, session_id=None, **sampling):
    return GenerationRequest(input_ids=ids, sampling=_params(n, **sampling), session_id=session_id)


def test_concurrent_batched_generation_equals_generate_and_reuses_sessions(tiny_model_dir):
    strategy = HFInferStrategy(tiny_model_dir)
    tok = strategy.tokenizer
    prompts = [tok.encode(t) for t in ("Turn 1: Observation: _ _ O G", "The quick brown fox", "<answer>Left</answer>", "P _ _ _\nhole")]
    results: dict[int, dict] = {}

    def worker(i: int) -> None:
        results[i] = strategy.generate([_req(prompts[i], session_id=f"s{i}")])[0]

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    for i, ids in enumerate(prompts):
        ref = model.generate(torch.tensor([ids]), max_new_tokens=10, do_sample=False, eos_token_id=tok.eos_token_id,
                             pad_token_id=tok.pad_token_id)[0, len(ids):].tolist()
        assert results[i].output_ids == ref
    # second turn of session 0: only the new tokens are prefilled; another session with the same prompt
    # copies the shared prefix (prefix caching); both equal a plain forward pass
    turn2 = prompts[0] + results[0].output_ids + tok.encode(" Observation: P _ O G")
    reused = strategy.generate([_req(turn2, session_id="s0")])[0]
    fresh = strategy.generate([_req(turn2, session_id="other")])[0]
    assert reused.cached_tokens == len(prompts[0]) + len(results[0].output_ids) - 1
    assert fresh.cached_tokens == len(turn2) - 1
    assert reused.output_ids == fresh.output_ids
    full = torch.tensor([turn2 + reused.output_ids])
    with torch.no_grad():
        logp = torch.log_softmax(model(full).logits[0].float(), -1)
    ref = logp[len(turn2) - 1 : -1].gather(1, full[0, len(turn2):, None])[:, 0]
    for got in (reused, fresh):
        assert torch.allclose(torch.tensor(got.logprobs), ref, atol=1e-4)

    # a weight update is seen at once, drops stale caches, and bumps the version
    new_state = {k: v * 1.5 for k, v in strategy.state_dict().items() if "layers.0.mlp" in k}
    strategy.load_state_dict(new_state, version=3)
    after = strategy.generate([_req(turn2, session_id="s0")])[0]
    assert after.weight_version == 3 and after.cached_tokens == 0
    assert after.logprobs != fresh.logprobs
    strategy.shutdown()


def test_sampling_rules_and_stop_strings(tiny_model_dir):
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.0]] * 2)
    g = [torch.Generator().manual_seed(0), torch.Generator().manual_seed(1)]
    tokens, logps = sample_tokens(logits, [_params(do_sample=True, temperature=1.0, top_k=1)] * 2, g)
    assert tokens.tolist() == [1, 1]  # top_k = 1 is greedy
    assert torch.allclose(logps, torch.log_softmax(logits, -1)[:, 1])  # raw log-probs, not the truncated ones
    many = [sample_tokens(logits[:1], [_params(do_sample=True, temperature=1.0, top_p=0.6, top_k=0)],
                          [torch.Generator().manual_seed(s)])[0].item() for s in range(40)]
    assert set(many) == {1}  # p(token 1) = 0.64 >= top_p: nothing else is kept

    strategy = HFInferStrategy(tiny_model_dir)
    prompt = strategy.tokenizer.encode("The quick brown fox")
    free = strategy.generate([_req(prompt, n=12)])[0]
    pieces = [strategy.tokenizer.decode([t]) for t in free.output_ids]
    k = next(i for i in range(2, len(pieces)) if pieces[i].strip() and pieces[i] not in "".join(pieces[:i]))
    stopped = strategy.generate([_req(prompt, n=12, stop_strings=[pieces[k]])])[0]
    assert stopped.finish_reason == "stop" and stopped.output_ids == free.output_ids[: k + 1]
    a = strategy.generate([_req(prompt, n=8, do_sample=True, temperature=1.0, seed=7)])[0]
    b = strategy.generate([_req(prompt, n=8, do_sample=True, temperature=1.0, seed=7)])[0]
    assert a.output_ids == b.output_ids  # a request's seed makes its sampling reproducible
    strategy.shutdown()


def test_an_architecture_off_the_lean_path_falls_back_and_stays_exact(tmp_path):
    from transformers import Qwen3Config

    from roll.models.tiny import build_tokenizer

    tok = build_tokenizer("qwen2")
    config = Qwen3Config(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16, eos_token_id=tok.eos_token_id,
                         pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    strategy = HFInferStrategy(tmp_path)  # q/k norms: not on the lean path
    assert type(strategy.engine.forward).__name__ == "HFCacheForward"
    model = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    prompt = tok.encode("Turn 1: Observation: _ _ O G")
    first = strategy.generate([_req(prompt, session_id="a")])[0]
    turn2 = prompt + first.output_ids + tok.encode(" Observation: P _ O G")
    second = strategy.generate([_req(turn2, session_id="a"), _req(turn2, session_id="b")])
    strategy.shutdown()
    assert second[0].cached_tokens > 0 and second[0].output_ids == second[1].output_ids
    full = torch.tensor([turn2 + second[0].output_ids])
    with torch.no_grad():
        logp = torch.log_softmax(model(full).logits[0].float(), -1)
    ref = logp[len(turn2) - 1 : -1].gather(1, full[0, len(turn2):, None])[:, 0]
    assert torch.allclose(torch.tensor(second[0].logprobs), ref, atol=1e-4)


def test_finished_episodes_give_their_slots_back_before_unused_slots_are_touched(tiny_model_dir):
    strategy = HFInferStrategy(tiny_model_dir, max_sessions=16)
    prompt = strategy.tokenizer.encode("Turn 1: Observation: _ _ O G")
    for episode in range(3):
        sessions = [f"e{episode}-{i}" for i in range(4)]
        strategy.generate([_req(prompt + [i + 5], n=4, session_id=sid) for i, sid in enumerate(sessions)])
        strategy.release(sessions)
    claimed = len(strategy.engine.cache.claimed)
    strategy.shutdown()
    assert claimed == 4  # 12 sessions went through 4 slots: finished episodes were reused before new slots
