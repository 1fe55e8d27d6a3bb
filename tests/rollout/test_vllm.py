"""The `vllm` inference strategy on this machine's CPU (vLLM's CPU build, in .venv-vllm: scripts/setup_vllm.sh).

Marked `vllm`: `bash scripts/test.sh` runs them in .venv-vllm; elsewhere they skip with the reason.
The models are tiny random ones with 32-wide attention heads (the narrowest vLLM's CPU attention takes).
"""

from __future__ import annotations

import pytest
import torch

from roll.configs.worker_config import StrategyArgs, WorkerConfig, ModelArgs
from roll.strategies.generation import GenerationRequest, SamplingParams
from roll.strategies.vllm_infer import vllm_unavailable_reason
from tests.rollout.helpers import fresh_logprobs

pytestmark = [pytest.mark.vllm, pytest.mark.skipif(vllm_unavailable_reason() is not None,
                                                  reason=str(vllm_unavailable_reason()))]


def vllm_config(model_dir, **strategy_config) -> WorkerConfig:
    return WorkerConfig(model_args=ModelArgs(model_name_or_path=str(model_dir)),
                        strategy_args=StrategyArgs(strategy_name="vllm", strategy_config=strategy_config or None))


@pytest.fixture(scope="module")
def vllm_qwen_dir(tmp_path_factory):
    from roll.models.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("vllm_qwen2") / "model", arch="qwen2", hidden_size=128)


@pytest.fixture(scope="module")
def vllm_llama_dir(tmp_path_factory):
    from roll.models.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("vllm_llama") / "model", arch="llama", hidden_size=128)


@pytest.fixture(scope="module")
def qwen_worker(vllm_qwen_dir):
    from roll.workers.infer_worker import InferWorker

    worker = InferWorker(vllm_config(vllm_qwen_dir), num_threads=1)
    yield worker
    worker.shutdown()


def assert_exact_episode(traj, model_dir, tokenizer) -> None:
    """Fresh forward log-probs equal the recorded ones; the decoded ids are the conversation."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    mask = torch.tensor(traj.response_mask, dtype=torch.bool)
    fresh = fresh_logprobs(model, traj.input_ids)
    recorded = torch.tensor(traj.infer_logprobs)
    assert mask.sum() >= 5
    assert torch.allclose(fresh[mask], recorded[mask], atol=1e-4), (fresh[mask] - recorded[mask]).abs().max()
    assert (recorded[~mask] == 0).all()
    text = tokenizer.decode(traj.input_ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    rendered = tokenizer.apply_chat_template(traj.messages, tokenize=False)
    closing = tokenizer.apply_chat_template([{"role": "assistant", "content": "@@"}], tokenize=False).split("@@", 1)[1]
    assert rendered.startswith(text)
    assert rendered[len(text):] in {closing, closing.removeprefix(tokenizer.eos_token)}
    assert [m["content"] for m in traj.messages if m["role"] == "assistant"] == traj.actions


def play_five_turns(worker, model_dir, seed: int):
    from transformers import AutoTokenizer

    from roll.pipeline.agentic.env_manager.traj_env_manager import TrajEnvManager
    from roll.pipeline.agentic.llm_proxy import PolicyProxy

    from tests.rollout.helpers import FROZEN_LAKE_SPEC, greedy, manager_config

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    manager = TrajEnvManager("FrozenLake", FROZEN_LAKE_SPEC, manager_config(greedy(12)), tokenizer,
                             PolicyProxy([worker]), sequence_length=4096)
    (traj,) = manager.run_episode(seed=seed)
    return traj, tokenizer


def test_llama_template_episode_is_exact_with_vllm(vllm_llama_dir):
    # first in this file: one live vLLM engine per process, and the module's qwen worker lives on
    from roll.workers.infer_worker import InferWorker

    worker = InferWorker(vllm_config(vllm_llama_dir), num_threads=1)
    try:
        traj, tokenizer = play_five_turns(worker, vllm_llama_dir, seed=4)
    finally:
        worker.shutdown()
    assert traj.env_metrics["num_actions"] == 5
    assert_exact_episode(traj, vllm_llama_dir, tokenizer)


def test_five_turn_episode_ids_and_logprobs_are_exact_with_vllm(qwen_worker, vllm_qwen_dir):
    traj, tokenizer = play_five_turns(qwen_worker, vllm_qwen_dir, seed=3)
    assert traj.env_metrics["num_actions"] == 5 and traj.step_rewards == [-0.01] * 5
    assert_exact_episode(traj, vllm_qwen_dir, tokenizer)
    stats = qwen_worker.get_stats()
    # turns 2-5 extend the previous prompt: vLLM's prefix cache served part of each
    assert stats["cached_tokens"] > 0 and stats["requests"] >= 5


def request(prompt: list[int], request_id: str, max_new_tokens: int = 16, seed: int | None = 7,
            greedy: bool = False, stop_strings: tuple[str, ...] | None = None) -> GenerationRequest:
    sampling = SamplingParams(max_new_tokens=max_new_tokens, do_sample=not greedy, temperature=0.0 if greedy else 1.0,
                              top_p=1.0, top_k=0, stop_strings=stop_strings, seed=seed)
    return GenerationRequest(input_ids=prompt, sampling=sampling, request_id=request_id)


def test_sampling_seeds_stop_strings_and_max_tokens_per_request(qwen_worker, vllm_qwen_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(vllm_qwen_dir)
    prompt = tokenizer("Turn 1: Observation: P _ _ G. Decide the next action.")["input_ids"]
    a, b, c, capped = qwen_worker.generate([request(prompt, "a"), request(prompt, "b"), request(prompt, "c", seed=8),
                                            request(prompt, "capped", max_new_tokens=3)])
    assert [r.request_id for r in (a, b, c, capped)] == ["a", "b", "c", "capped"]
    assert a.output_ids == b.output_ids and a.output_ids != c.output_ids  # per-request seeds
    assert capped.output_ids == a.output_ids[:3] and capped.finish_reason == "length"
    # a stop string taken from what seed 7 generates ends that same sample early, at that token
    text_after = [tokenizer.decode(a.output_ids[: i + 1]) for i in range(len(a.output_ids))]
    cut = next(i for i in range(1, len(text_after)) if text_after[i] != text_after[i - 1])
    stop = text_after[cut][len(text_after[cut - 1]):]
    [early] = qwen_worker.generate([request(prompt, "early", stop_strings=(stop,))])
    assert early.finish_reason == "stop" and early.output_ids == a.output_ids[: len(early.output_ids)]
    assert stop in tokenizer.decode(early.output_ids) and len(early.output_ids) <= cut + 1


def test_the_openai_server_in_front_of_vllm_records_an_exact_multi_turn_sample(qwen_worker, vllm_qwen_dir):
    """A user's agent on the official `openai` client, served by vLLM through roll's OpenAI server: three
    turns of sampled replies become one recorded sample whose log-probs a fresh forward reproduces."""
    import openai
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from roll.pipeline.agentic.llm_proxy.openai_server import OpenAIServer

    tokenizer = AutoTokenizer.from_pretrained(vllm_qwen_dir)
    server = OpenAIServer(tokenizer, engine=qwen_worker).start()
    try:
        recorder = server.open_episode("vllm-episode", qwen_worker.generate)
        api = openai.OpenAI(base_url=server.episode_url("vllm-episode"), api_key="x", max_retries=0, timeout=120)
        messages = [{"role": "system", "content": "You walk a grid."}, {"role": "user", "content": "P _ G. Your move?"}]
        for turn in range(3):
            reply = api.chat.completions.create(model="m", messages=messages, max_tokens=12, temperature=1.0,
                                                seed=turn, logprobs=True)
            choice = reply.choices[0]
            assert len(choice.logprobs.content) == len(choice.model_extra["token_ids"]) >= 1
            messages += [choice.message.model_dump(exclude_none=True), {"role": "user", "content": f"Turn {turn + 2}?"}]
        server.close_episode("vllm-episode")
    finally:
        server.stop()
    assert recorder.metrics() == {"agent/calls": 3.0, "agent/unattributed_calls": 0.0, "agent/samples": 1.0}
    (sample,) = recorder.samples
    model = AutoModelForCausalLM.from_pretrained(vllm_qwen_dir).eval()
    mask = torch.tensor(sample.tokens.response_mask, dtype=torch.bool)
    fresh, recorded = fresh_logprobs(model, sample.tokens.input_ids), torch.tensor(sample.tokens.logprobs)
    assert torch.allclose(fresh[mask], recorded[mask], atol=1e-4), (fresh[mask] - recorded[mask]).abs().max()


def test_weight_update_changes_greedy_outputs_and_the_version_then_restores(qwen_worker, vllm_qwen_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(vllm_qwen_dir)
    prompt = tokenizer("FrozenLake: move P to the goal G. Your move?")["input_ids"]
    greedy_request = request(prompt, "w", max_new_tokens=12, seed=None, greedy=True)
    [before] = qwen_worker.generate([greedy_request])
    original = AutoModelForCausalLM.from_pretrained(vllm_qwen_dir).state_dict()
    torch.manual_seed(0)
    changed = {k: v + 0.5 * torch.randn_like(v) if k.endswith("weight") else v for k, v in original.items()}
    qwen_worker.update_weights(changed, version=1)
    [after] = qwen_worker.generate([greedy_request])
    assert qwen_worker.get_version() == 1 and after.weight_version == 1 and before.weight_version == 0
    assert after.output_ids != before.output_ids
    # the log-probs are the new model's: a fresh transformers forward with the changed weights agrees
    model = AutoModelForCausalLM.from_pretrained(vllm_qwen_dir).eval()
    model.load_state_dict(changed)
    ids = torch.tensor([prompt + after.output_ids])
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[0, len(prompt) - 1:-1].float(), -1)
    fresh = logp.gather(1, torch.tensor(after.output_ids)[:, None])[:, 0]
    assert torch.allclose(fresh, torch.tensor(after.logprobs), atol=1e-4)
    qwen_worker.update_weights(original, version=2)
    [restored] = qwen_worker.generate([greedy_request])
    assert restored.output_ids == before.output_ids and restored.weight_version == 2


def test_strategy_config_keys_are_honoured_or_reported(vllm_qwen_dir, tmp_path):
    from roll.models.tiny import build_tiny_model
    from roll.strategies.vllm_infer import VLLMInferStrategy, engine_kwargs

    passed, ignored = engine_kwargs({"block_size": 32, "gpu_memory_utilization": 0.8, "load_format": "auto",
                                     "max_model_len": 1024}, cuda=False)
    assert passed["block_size"] == 32 and passed["load_format"] == "auto" and passed["max_model_len"] == 1024
    assert "gpu_memory_utilization" in ignored and "gpu_memory_utilization" not in passed
    # a model whose heads vLLM's CPU attention cannot take is refused before the engine starts
    narrow = build_tiny_model(tmp_path / "narrow", hidden_size=64)  # 4 heads of 16
    with pytest.raises(ValueError, match="attention heads of size 16; vLLM's CPU attention needs 32"):
        VLLMInferStrategy(narrow)
    # the guide config's block_size 16 (a GPU value) becomes the CPU attention's multiple of 32
    passed, ignored = engine_kwargs({"block_size": 16}, cuda=False)
    assert passed["block_size"] == 32 and "roll passes block_size=32 instead of 16" in ignored["block_size"]
    assert engine_kwargs({"block_size": 16}, cuda=True)[0]["block_size"] == 16
    with pytest.raises(ValueError, match="strategy_config.gpu_memory_utilisation: not a vLLM engine argument"):
        engine_kwargs({"gpu_memory_utilisation": 0.8}, cuda=False)


@pytest.fixture(scope="module")
def ray_vllm_worker(ray_session, vllm_qwen_dir):
    """An InferWorker with a vLLM engine in its own Ray actor process (as the pipeline hosts it)."""
    import ray

    from roll.workers.infer_worker import InferWorker

    actor = ray.remote(InferWorker).options(num_cpus=1, **InferWorker.RAY_ACTOR_OPTIONS).remote(
        vllm_config(vllm_qwen_dir), num_threads=1)
    ray.get(actor.get_version.remote())
    yield actor
    ray.get(actor.shutdown.remote())
    ray.kill(actor)


def test_64_frozen_lake_episodes_through_ray_in_whole_groups_with_vllm(ray_vllm_worker, vllm_qwen_dir):
    import ray

    from roll.configs.agentic_config import EnvManagerConfig
    from roll.pipeline.agentic.rollout_scheduler import RolloutScheduler

    from tests.rollout.helpers import greedy
    from tests.rollout.test_rollout_scheduler import frozen_lake

    cfg = EnvManagerConfig(num_env_groups=8, group_size=8, tags=["FrozenLake"], max_env_num_per_worker=32,
                           generating_args=greedy(8))
    before = ray.get(ray_vllm_worker.get_stats.remote())
    scheduler = RolloutScheduler(cfg, {"FrozenLake": frozen_lake()}, sequence_length=700, seed=1,
                                 tokenizer_path=str(vllm_qwen_dir), infer=[ray_vllm_worker])
    try:
        batch = scheduler.get_batch(64, step=0)
    finally:
        scheduler.shutdown()
    stats = ray.get(ray_vllm_worker.get_stats.remote())
    assert len(batch) == 64 and batch.info["rollout/failures"] == 0
    groups: dict[str, list[int]] = {}
    for i, g in enumerate(batch["traj_group_id"]):
        groups.setdefault(g, []).append(i)
    assert len(groups) == 8 and all(len(v) == 8 for v in groups.values())
    assert all(len({batch["env_seed"][i] for i in members}) == 1 for members in groups.values())
    assert (batch["infer_logprobs"][batch["response_mask"] == 0] == 0).all()
    assert (batch["infer_logprobs"][batch["response_mask"] == 1] < 0).all()
    # every generated token came from vLLM, and later turns (and group members) hit its prefix cache
    assert stats["decode_tokens"] - before["decode_tokens"] == int(batch["response_mask"].sum())
    assert stats["cached_tokens"] > before["cached_tokens"]


def test_an_env_that_raises_fails_only_its_episode_with_vllm(ray_vllm_worker, vllm_qwen_dir, caplog):
    from roll.configs.agentic_config import EnvManagerConfig
    from roll.pipeline.agentic.rollout_scheduler import RolloutScheduler

    from tests.rollout.helpers import greedy
    from tests.rollout.test_rollout_scheduler import frozen_lake

    cfg = EnvManagerConfig(num_env_groups=4, group_size=2, tags=["Faulty"], max_env_num_per_worker=8,
                           generating_args=greedy(8))
    scheduler = RolloutScheduler(cfg, {"Faulty": frozen_lake("tests.rollout.faulty_envs.RaisingFrozenLake", max_steps=2)},
                                 sequence_length=700, seed=0, tokenizer_path=str(vllm_qwen_dir), infer=[ray_vllm_worker])
    try:
        with caplog.at_level("WARNING"):
            batch = scheduler.get_batch(8, step=0)
    finally:
        scheduler.shutdown()
    assert len(batch) == 8
    assert batch.info["rollout/failures/env_error"] >= 1
    assert all(seed % 3 != 0 for seed in batch["env_seed"])  # the raising seeds were replaced
    assert any("env_error" in r.message and "tag=Faulty seed=" in r.message for r in caplog.records)
    assert (batch["response_mask"].sum(1) > 0).all()  # the surviving episodes generated with vLLM
