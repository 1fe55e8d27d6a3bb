"""AgenticConfig: the schema of an agentic run (its sections and their defaults), as dataclasses.

This module is data only. Loading a YAML into it, validating it and adapting it to a CPU happen
above every other layer, in roll/launch/ (`roll.launch.loader.load_agentic_config`), so a bad config
fails before any worker starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from roll.algorithms.advantages import estimator_needs_values
from roll.configs.base_config import BaseConfig
from roll.configs.report_config import AlarmConfig, ReportConfig
from roll.configs.worker_config import GeneratingArgs, WorkerConfig

DEFAULT_ENV_MANAGER_CLS = "roll.pipeline.agentic.env_manager.traj_env_manager.TrajEnvManager"
# ROLL's agent_template (its examples/config/traj_envs.yaml)
DEFAULT_AGENT_TEMPLATE = (
    "Turn {turn_idx}:\nObservation:\n{observation}\nStrictly follow this format:\n"
    "1. output format is '<answer> [your answer] </answer>' with no extra text. \n"
    "2. You have {actions_left} actions left. \n3. Max response length: {max_response_length} words (tokens).\n"
    "Decide the next action:\n"
)


@dataclass
class CustomEnvConfig:
    """One entry of `custom_envs`: an environment type plus how the agent is prompted for it."""

    # a registered env name (roll.agentic.env.list_env_types()) or the class path of a BaseEnv subclass
    # in your own module on PYTHONPATH (my_pkg.envs.MyEnv); None only for an agent runner that plays
    # its own game (ProxyEnvManager, docs/agents.md)
    env_type: str | None = "frozen_lake"
    max_steps: int = 10  # turns per episode; `max_actions_per_traj` / `max_steps_per_traj` are aliases
    max_tokens_per_step: int = 128  # new tokens per turn
    env_instruction: str | None = None  # overrides the env's own instruction
    agent_system_template: str = "You're a helpful assistant. You are a good game player. You are aiming to get high reward in the game."
    agent_template: str = DEFAULT_AGENT_TEMPLATE  # may use {turn_idx} {observation} {actions_left} {max_response_length} {suffix} (empty: roll folds it into the observation)
    env_config: dict[str, Any] = field(default_factory=dict)  # kwargs of the env's config dataclass
    # ROLL's tool block ({wrapper_args, tool_configs}); the env gets it as env_config.tool_wrapper
    # (envs whose config takes one: tool_use). See docs/environments.md, "Tool use".
    tool_wrapper: dict[str, Any] | None = None
    # class path of the env manager that plays this env (TrajEnvManager or a subclass); imported at
    # config load, so a path that does not import fails before any worker starts
    env_manager_cls: str = DEFAULT_ENV_MANAGER_CLS
    # class path of the agent that plays the episodes (run_episode(seed, base_url, env_config)); read by
    # env_manager_cls ProxyEnvManager (docs/agents.md), refused with any other manager
    agent_runner_cls: str | None = None
    # step-wise env managers (StepEnvManager): how many earlier (observation, reply) pairs each turn's
    # prompt shows; the trajectory-wise managers keep the whole conversation and ignore it
    history_length: int = 5
    ALIASES: ClassVar[dict[str, str]] = {"max_actions_per_traj": "max_steps", "max_steps_per_traj": "max_steps"}


@dataclass
class EnvManagerConfig:
    """How many environments run, in which groups, and how their agent generates."""

    num_env_groups: int = 1
    group_size: int = 1  # envs in a group share one seed per episode: the GRPO group
    tags: list[str] = field(default_factory=list)  # names from custom_envs
    num_groups_partition: list[int] | None = None  # groups per tag; None = split evenly
    max_env_num_per_worker: int = 0  # envs per EnvironmentWorker; 0 = all in one worker
    format_penalty: float | None = None  # overrides each env's own format_penalty when set
    generating_args: GeneratingArgs | None = None  # default: actor_infer.generating_args
    max_traj_per_env: int = -1  # episodes an env may contribute to one batch; -1 = no limit
    env_timeout_s: float | None = 60.0  # an env call (make, reset, step) slower than this fails its episode; None = no limit
    max_worker_restarts: int = 4  # times Ray may replace each EnvironmentWorker process that died; -1 = no limit
    # each tag numbers its own episodes' seeds, so all tags play the same tasks (variants of one env
    # compared on the same seeds, e.g. a tool env with and without its tool); False: one numbering
    seeds_per_tag: bool = False
    # exploration (roll's key): the share of turns where the manager plays the env's random legal answer
    # instead of asking the policy; those turns train like sampled ones (docs/rollout.md). Training only.
    random_action_rate: float = 0.0

    @property
    def env_count(self) -> int:
        return self.num_env_groups * self.group_size


@dataclass
class SFTWarmupConfig:
    """Optional supervised warm-up before RL: a few SFT steps on trajectories of an env's scripted policy."""

    steps: int = 0  # 0 = no warm-up
    policy: str = "random"  # random (teaches the format, not the task) | optimal | tool (calls the tool, answers its output)
    episodes_per_step: int = 8
    learning_rate: float = 1.0e-4
    tags: list[str] | None = None  # envs to draw episodes from; default: train_env_manager.tags
    # Validate at step 0, before the warm-up. The base model answers in no format the envs accept, so that
    # validation is success 0 at the cost of every episode running to its turn limit; false skips it
    # (the validation after the warm-up, before the first RL step, stays).
    validate_before: bool = True


@dataclass
class AgenticConfig(BaseConfig):
    custom_envs: dict[str, CustomEnvConfig] = field(default_factory=dict)
    train_env_manager: EnvManagerConfig = field(default_factory=EnvManagerConfig)
    val_env_manager: EnvManagerConfig = field(default_factory=EnvManagerConfig)
    actor_train: WorkerConfig = field(default_factory=WorkerConfig)
    actor_infer: WorkerConfig = field(default_factory=WorkerConfig)
    critic: WorkerConfig | None = None  # needed by adv_estimator: gae; defaults to actor_train's settings
    reference: WorkerConfig | None = None  # needed when a KL term is used; defaults to actor_infer's model
    sft_warmup: SFTWarmupConfig = field(default_factory=SFTWarmupConfig)
    report: ReportConfig = field(default_factory=ReportConfig)  # saved trajectories, report.html, progress lines
    alarms: AlarmConfig = field(default_factory=AlarmConfig)  # collapse alarm thresholds
    # Skip scoring and training GRPO groups whose scores are all equal, where that is provably a zero
    # gradient (roll/pipeline/agentic/group_filter.py says when); the step trains on fewer samples.
    drop_zero_gradient_groups: bool = True

    # step-level credit (docs/algorithms.md): read by adv_estimator gigpo and step_reinforce
    step_reward_gamma: float = 0.95  # discount of the per-turn env rewards in a step return
    episode_reward_weight: float = 1.0  # GiGPO: weight of the episode-level group advantage
    step_reward_weight: float = 1.0  # GiGPO: weight of the step-level anchor-state advantage
    # GiGPO: a turn that left the env state unchanged (a rejected reply, a walk into a wall) gets an
    # advantage of at most 0 instead of a share of what its episode earned later (docs/algorithms.md)
    cap_idle_turn_advantage: bool = False
    # Make the number of training samples a multiple of actor_train's optimizer batch (mini_batch_size
    # × ranks): copy | delete | auto | random_sample (batch_adjust.py); None trains on every sample as
    # it is (the last mini-batch may be smaller). Step-wise rollouts give a varying count.
    batch_adjust_mode: str | None = None

    # Top-level names that ROLL's envs files define only to be interpolated elsewhere
    # (e.g. `max_steps: ${max_actions_per_traj}`); they are YAML variables, not settings.
    ROLL_YAML_VARIABLES: ClassVar[frozenset[str]] = frozenset({
        "custom_env", "max_actions_per_traj", "max_tokens_per_step", "action_pattern", "think_action_pattern",
        "all_response_pattern", "sokoban_format_penalty", "frozen_format_penalty", "env_manager_cls",
        "agent_runner_cls", "agent_system_template", "agent_template", "single_prompt_agent_system_template",
        "single_prompt_agent_template",
    })

    @property
    def uses_critic(self) -> bool:
        return estimator_needs_values(self.adv_estimator)

    @property
    def uses_reference(self) -> bool:
        kl_in_reward = self.add_token_level_kl and (self.init_kl_coef > 0 or self.target_kl is not None)
        return kl_in_reward or (self.use_kl_loss and self.kl_loss_coef > 0)
