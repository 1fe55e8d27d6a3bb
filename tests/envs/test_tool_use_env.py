"""The tool_use env: tasks that need the tool, the call formats, ROLL's tool_wrapper keys, seeds,
and hostile model output (including hostile code)."""

from __future__ import annotations

import copy
import random
import re

import pytest
import yaml

from roll.agentic.env import make_env
from roll.agentic.env.tool_use.config import parse_tool_wrapper
from roll.agentic.env.tool_use.sandbox import sandbox_unavailable_reason
from roll.agentic.env.tool_use.tools import call_example
from tests.conftest import roll_examples
from tests.envs.test_fuzz import hostile_outputs

if sandbox_unavailable_reason():  # a property of the machine (no namespaces), not of roll: say why
    pytest.skip(f"the Python tool sandbox cannot run here: {sandbox_unavailable_reason()}", allow_module_level=True)

PENALTY = -0.25
TABLE_CODE = (
    "import csv, re\nrows = list(csv.DictReader(open('inventory.csv')))\n"
    "print(sum(int(r['quantity']) * int(r['unit_price']) for r in rows if r['warehouse'] == {w!r}))"
)


def solve_with_tool(env, call_format: str) -> tuple[float, dict]:
    """Play the episode as a tool-using agent would: compute with the tool, answer its output."""
    question, _ = env.reset(seed=11)
    if env.config.task == "multiplication":
        a, b = question.removeprefix("What is ").split("?")[0].split(" * ")
        code = f"print({a} * {b})"
    else:
        code = TABLE_CODE.format(w=question.split("warehouse '")[1].split("'")[0])
    obs, tool_reward, terminated, _, info = env.step("Let me compute.\n" + call_example(call_format, code))
    assert info["observation_role"] == "tool" and not terminated, obs
    _, reward, terminated, _, info = env.step(f"<answer>{obs.strip()}</answer>")
    assert terminated
    return tool_reward + reward, info


@pytest.mark.parametrize("task", ["multiplication", "table_lookup"])
@pytest.mark.parametrize("call_format", ["tagged", "json"])
def test_the_tool_solves_the_task(task, call_format):
    env = make_env("tool_use", task=task, tool_call_format=call_format,
                   tool_wrapper={"wrapper_args": {"tool_success_reward": 0.1}})
    total, info = solve_with_tool(env, call_format)
    assert total == pytest.approx(1.1)
    assert info["metrics"]["success"] == 1.0 and info["metrics"]["tool_calls"] == 1.0


def test_the_task_cannot_be_read_off_the_observation():
    env = make_env("tool_use", task="table_lookup", table_rows=30)
    question, info = env.reset(seed=3)
    table = env.task.files["inventory.csv"]
    numbers = {field for line in table.splitlines()[1:] for field in line.split(",")[2:]}
    assert len(numbers) > 20 and not numbers & set(re.findall(r"\d+", question))
    assert str(env.task.answer) not in question
    # guessing (the random scripted policy) does not solve the multiplication task
    env = make_env("tool_use", num_digits=12)
    rng = random.Random(0)
    wins = 0
    for seed in range(20):
        env.reset(seed=seed)
        wins += env.step(env.format_answer(env.random_answer(rng)))[4]["metrics"]["success"]
    assert wins == 0


def test_same_seed_same_episode_and_different_seeds_differ():
    a, b = make_env("tool_use", task="table_lookup"), make_env("tool_use", task="table_lookup")
    assert a.reset(seed=5) == b.reset(seed=5) and a.task == b.task
    assert a.step("<python>print(open('inventory.csv').read()[:80])</python>")[:3] == b.step("<python>print(open('inventory.csv').read()[:80])</python>")[:3]
    a.reset(seed=6)
    assert a.task != b.task


def test_tool_budget_and_malformed_calls_cost_the_format_penalty():
    env = make_env("tool_use", format_penalty=PENALTY, max_steps=10, tool_call_format="json",
                   tool_wrapper={"wrapper_args": {"max_tool_uses": 1}})
    env.reset(seed=0)
    for text in ('<tool_call>{"name": "python"</tool_call>', '<tool_call>{"name": "shell", "arguments": {"code": "ls"}}</tool_call>',
                 '<tool_call>{"name": "python", "arguments": {"cmd": "ls"}}</tool_call>', "<tool_call>[1, 2]</tool_call>",
                 '<tool_call>{"name": "python", "arguments": {"code": "   "}}</tool_call>'):
        obs, reward, terminated, _, info = env.step(text)
        assert (reward, terminated, info["metrics"]["action_is_valid"]) == (PENALTY, False, 0.0), text
        assert obs.startswith("Tool call rejected") and "observation_role" not in info
    assert env.step(call_example("json", "print(1)"))[0] == "1"
    obs, reward, _, _, info = env.step(call_example("json", "print(2)"))
    assert reward == PENALTY and "no tool calls left" in obs and env.tool_calls == 1


def test_rolls_tool_wrapper_blocks_from_rolls_configs_parse():
    config = yaml.safe_load(roll_examples("config", "traj_envs_gem_math.yaml").read_text())
    blocks = [spec["tool_wrapper"] for spec in config["gem_math"].values() if "tool_wrapper" in spec]
    assert len(blocks) >= 3
    for block in blocks:
        parsed = parse_tool_wrapper(block)
        assert parsed.max_tool_uses == block["wrapper_args"]["max_tool_uses"]
        assert parsed.limits.timeout_s == block["tool_configs"][0]["tool_args"]["timeout"]


@pytest.mark.parametrize("block, message", [
    ({"tool_configs": [{"tool_id": "mcp"}]}, "roll ships only 'python_code'"),
    ({"wrapper_args": {"max_tool_use": 2}}, "unknown keys ['max_tool_use']"),
    ({"tool_configs": [{"tool_id": "python_code", "tool_args": {"timeout": 0}}]}, "timeout_s must be > 0"),
    ({"tool_configs": [{"tool_id": "python_code", "tool_args": {"memory": 9}}]}, "unknown keys ['memory']"),
    ({"wrappers": {}}, "unknown keys ['wrappers']"),
])
def test_bad_tool_wrapper_blocks_fail_with_the_key_named(block, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        make_env("tool_use", tool_wrapper=block)


def test_last_move_line_is_refused_where_the_prompt_already_keeps_the_conversation():
    with pytest.raises(ValueError, match="describe_last_move.*whole conversation"):
        make_env("tool_use", describe_last_move=True)


def test_hostile_outputs_and_hostile_code_never_raise():
    env = make_env("tool_use", format_penalty=PENALTY, max_steps=10_000,
                   tool_wrapper={"wrapper_args": {"max_tool_uses": 1000}, "tool_configs": [{"tool_id": "python_code", "tool_args": {"timeout": 1}}]})
    rng = random.Random("tool_use")
    cases = hostile_outputs(rng, None, think_first=False)
    code_cases = ["<python>", "<python></python>", "<python>" + "x" * 30_000 + "</python>", "</python><python>",
                  "<python>while True: pass</python>", "<python>import os\nwhile True: os.fork()</python>",
                  "<python>raise SystemExit(3)</python>", "<python>print('\\x00' * 10 ** 6)</python>",
                  "<python>import os; os.kill(1, 9)</python>", "<tool_call>{}</tool_call>"]
    cases += [(text, None) for text in code_cases]
    rng.shuffle(cases)
    env.reset(seed=0)
    invalid = tool_runs = 0
    for text, _ in cases:
        before = {k: copy.deepcopy(v) for k, v in vars(env).items() if k != "num_turns"}
        obs, reward, terminated, truncated, info = env.step(text)
        assert set(info["metrics_agg_mode"]) == set(info["metrics"]) and isinstance(obs, str)
        tool_runs += info.get("observation_role") == "tool"
        if info["metrics"]["action_is_valid"] == 0.0:
            invalid += 1
            assert reward == PENALTY and not terminated and not truncated
            assert {k: v for k, v in vars(env).items() if k != "num_turns"} == before, text[:80]
        if terminated or truncated:
            env.reset(seed=env.seed + 1)
    assert invalid > 30
    assert tool_runs >= 5  # the hostile programs really ran (and were contained)


def test_the_example_entries_build_and_the_tool_solves_them():
    from omegaconf import OmegaConf

    entries = OmegaConf.to_container(OmegaConf.load("examples/config/envs.yaml"), resolve=True)["custom_env"]
    for tag in ("ToolMultiplication", "ToolTableLookup"):
        entry = entries[tag]
        assert entry["env_manager_cls"].endswith("tool_env_manager.ToolEnvManager")
        env = make_env(entry["env_type"], **entry["env_config"])
        total, info = solve_with_tool(env, env.config.tool_call_format)
        assert info["metrics"]["success"] == 1.0, tag


def test_a_tool_env_in_a_pipeline_config_loads_with_rolls_tool_wrapper_beside_env_config():
    from roll.configs import ConfigError
    from roll.launch.loader import load_agentic_config

    cpu = ("examples/smollm2-135M-agentic_cpu", "agent_val_frozen_lake")
    tool_env = [
        "+custom_envs.Tool.env_type=tool_use",
        "+custom_envs.Tool.env_manager_cls=roll.pipeline.agentic.env_manager.tool_env_manager.ToolEnvManager",
        "+custom_envs.Tool.env_config.max_steps=4",
        "+custom_envs.Tool.tool_wrapper.wrapper_args.max_tool_uses=2",
        "+custom_envs.Tool.tool_wrapper.tool_configs=[{tool_id: python_code, tool_args: {timeout: 3}}]",
    ]
    config = load_agentic_config(*cpu, overrides=tool_env)
    assert config.custom_envs["Tool"].tool_wrapper["wrapper_args"]["max_tool_uses"] == 2
    with pytest.raises(ConfigError, match="roll ships only 'python_code'"):
        load_agentic_config(*cpu, overrides=tool_env[:-1] + ["+custom_envs.Tool.tool_wrapper.tool_configs=[{tool_id: mcp}]"])
    with pytest.raises(ConfigError, match="takes no tool_wrapper"):
        load_agentic_config(*cpu, overrides=["+custom_envs.FrozenLakeCPU.tool_wrapper.wrapper_args.max_tool_uses=1"])
