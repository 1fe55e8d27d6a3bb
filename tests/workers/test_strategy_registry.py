"""The strategy facts table drives the factories, validation and the machine checks."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from roll.configs import ConfigError
from roll.launch.runtime_checks import check_runnable
from roll.launch.loader import load_agentic_config
from roll.strategies import STRATEGIES, StrategyFacts, create_infer_strategy, register_strategy, strategy_problem
from roll.strategies.hf_infer import HFInferStrategy

CPU = ("examples/smollm2-135M-agentic_cpu", "agent_val_frozen_lake")


class RecordingInferStrategy:
    """A stand-in inference strategy that keeps the arguments the factory handed it."""

    def __init__(self, model_path: str, seed: int = 0, max_batch_size: int = 1) -> None:
        self.model_path, self.seed, self.max_batch_size = model_path, seed, max_batch_size


@pytest.fixture
def table(monkeypatch):
    """The facts table, restored after the test."""
    for name, facts in list(STRATEGIES.items()):
        monkeypatch.setitem(STRATEGIES, name, facts)
    yield STRATEGIES
    for name in [n for n in STRATEGIES if n.endswith("_test")]:
        del STRATEGIES[name]


def test_create_infer_strategy_builds_hf_infer_with_the_options_it_takes(tiny_model_dir):
    # num_threads (vLLM's) is not a parameter of HFInferStrategy: the factory leaves it out instead of
    # failing; strategy_config is one, and its max_num_seqs overrides the max_sessions default
    strategy = create_infer_strategy("hf_infer", str(tiny_model_dir), dtype="fp32", device="cpu", max_sessions=3,
                                     max_batch_size=5, strategy_config={"max_num_seqs": 4}, num_threads=1, seed=1)
    try:
        assert isinstance(strategy, HFInferStrategy)
        assert (strategy.engine.max_sessions, strategy.engine.max_batch_size) == (4, 5)
    finally:
        strategy.shutdown()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_create_infer_strategy_refuses_sglang_without_gpu_and_vllm_without_its_package(tiny_model_dir):
    with pytest.raises(ValueError) as info:
        create_infer_strategy("sglang", str(tiny_model_dir))
    message = str(info.value)
    assert "sglang needs a CUDA GPU" in message and "strategy_name: vllm" in message and "hf_infer" in message
    if importlib.util.find_spec("vllm") is None:  # in .venv; .venv-vllm's tests (tests/rollout/test_vllm.py) build it
        with pytest.raises(ValueError) as info:
            create_infer_strategy("vllm", str(tiny_model_dir))
        message = str(info.value)
        assert "vLLM, which is not installed: bash scripts/setup_vllm.sh" in message and "strategy_name: hf_infer" in message
    with pytest.raises(ValueError, match="unknown inference strategy 'hf_train'.*'hf_infer'"):
        create_infer_strategy("hf_train", str(tiny_model_dir))


def test_a_new_row_is_built_and_validated_by_role(table):
    register_strategy(StrategyFacts("recording_infer_test", "infer", f"{__name__}.RecordingInferStrategy"))
    strategy = create_infer_strategy("recording_infer_test", "/some/model", seed=7, device="cpu", max_sessions=2)
    assert isinstance(strategy, RecordingInferStrategy)
    assert (strategy.model_path, strategy.seed, strategy.max_batch_size) == ("/some/model", 7, 1)

    config = load_agentic_config(*CPU, overrides=["actor_infer.strategy_args.strategy_name=recording_infer_test"])
    assert config.actor_infer.strategy_args.strategy_name == "recording_infer_test"
    with pytest.raises(ConfigError) as info:
        load_agentic_config(*CPU, overrides=["actor_train.strategy_args.strategy_name=recording_infer_test"])
    message = str(info.value)  # the train role lists the table's train names, not the new infer row
    assert "actor_train.strategy_args.strategy_name" in message and "'fsdp2_train'" in message
    assert "recording_infer_test" not in message.split("use one of")[1]


def test_machine_check_messages_come_from_the_row(table):
    register_strategy(StrategyFacts("gpu_only_test", "infer", f"{__name__}.RecordingInferStrategy", needs_cuda=True,
                                    package="no_such_package_test", package_title="NoSuchPkg",
                                    install="pip install no-such-package", alternative="hf_infer (here: CPU)"))
    without_gpu = strategy_problem("gpu_only_test", cuda=False)
    assert "gpu_only_test needs a CUDA GPU" in without_gpu and "NoSuchPkg" in without_gpu
    assert "strategy_name: hf_infer (here: CPU)" in without_gpu and "smollm2-135M-agentic_cpu" in without_gpu
    with_gpu = strategy_problem("gpu_only_test", cuda=True)
    assert with_gpu == "gpu_only_test needs NoSuchPkg, which is not installed: pip install no-such-package. Use strategy_name: hf_infer (here: CPU)."
    assert strategy_problem("hf_infer", cuda=False) is None and strategy_problem("fsdp2_train", cuda=False) is None


def test_roll_names_without_an_implementation_are_refused_before_workers_start():
    config = load_agentic_config(*CPU, overrides=["+reference.strategy_args.strategy_name=megatron_infer", "init_kl_coef=0.1",
                                          "add_token_level_kl=true"])
    with pytest.raises(ConfigError) as info:
        check_runnable(config)
    message = str(info.value)
    assert message.startswith("reference.strategy_args.strategy_name: megatron_infer")
    assert "not supported by roll" in message and "strategy_name: hf_infer" in message


def test_lora_with_a_strategy_that_cannot_train_adapters_fails_at_load():
    with pytest.raises(ConfigError) as info:
        load_agentic_config(*CPU, overrides=["actor_train.strategy_args.strategy_name=fsdp2_train",
                                     "actor_train.model_args.lora_rank=8"])
    message = str(info.value)
    assert "actor_train.model_args.lora_rank" in message and "'fsdp2_train'" in message and "['hf_train']" in message


def test_the_default_reference_scores_without_lora_adapters():
    """It never trains, and after an SFT warm-up it takes the merged weights, which adapters could not."""
    config = load_agentic_config("examples/smollm2-135M-agentic_cpu", "agent_reinforce_pp_frozen_lake",
                                 overrides=["actor_train.model_args.lora_rank=8", "actor_infer.model_args.lora_rank=8"])
    assert config.actor_infer.model_args.lora_rank == 8 and config.reference.model_args.lora_rank is None


def test_a_row_that_can_be_refused_must_say_what_to_use_instead(table):
    with pytest.raises(ValueError, match="needs `alternative`"):
        register_strategy(StrategyFacts("no_class_test", "infer", None, refusal="not built yet."))
    with pytest.raises(ValueError, match="`refusal` when class_path is None"):
        register_strategy(StrategyFacts("no_reason_test", "infer", None, alternative="hf_infer"))
    with pytest.raises(ValueError, match="already registered"):
        register_strategy(StrategyFacts("hf_infer", "infer", "roll.strategies.hf_infer.HFInferStrategy"))
    assert "no_class_test" not in STRATEGIES and "no_reason_test" not in STRATEGIES
