"""Run-level and algorithm settings shared by roll's pipelines (docs/configuration.md). Defaults follow ROLL."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from roll.algorithms.train_infer import TrainInferCorrectionConfig
from roll.configs.warm_start_config import WarmStartConfig


@dataclass
class RewardNormalizationConfig:
    grouping: str = "batch"  # batch | tags | traj_group_id | any per-trajectory key (ROLL's default: batch)
    method: str = "identity"  # identity | mean | mean_std | asym_clip
    norm_mean_type: str | None = None  # batch | group; None: from `method`
    norm_std_type: str | None = None  # batch | group; None: from `method`


@dataclass
class RolloutMockConfig:
    """ROLL's rollout dump/mock switch (roll/pipeline/agentic/rollout_dump.py): `dump` writes every
    training rollout batch under dump_dir; `mock` trains on those batches instead of generating."""

    enable: bool = False
    mode: str = "dump"  # dump | mock
    dump_dir: str = "./output/rollout_dumps"


@dataclass
class BaseConfig:
    exp_name: str = "roll_experiment"
    seed: int = 42
    logging_dir: str = "./output/logs"
    output_dir: str = "./output"
    system_envs: dict[str, str] = field(default_factory=dict)  # environment variables for every worker
    track_with: str = "stdout"  # stdout | tensorboard | wandb, or several joined by commas
    tracker_kwargs: dict[str, Any] = field(default_factory=dict)
    checkpoint_config: dict[str, Any] = field(default_factory=dict)  # {type: file_system, output_dir: …}
    pipeline_cls: str | None = None  # import path of the pipeline class; default AgenticPipeline

    max_steps: int = 500
    save_steps: int = 50
    logging_steps: int = 1
    eval_steps: int = 10
    # continue this same run exactly: false | true (latest under output_dir) | a checkpoint path; a
    # checkpoint saved under a config that trains differently is refused, naming the keys
    resume_from_checkpoint: bool | str = False
    # start a new run from another run's checkpoint, or from an earlier stage's (docs/pipeline.md)
    warm_start_from: WarmStartConfig | None = None
    # a worker lost for good (a training worker's death, restarts used up) restarts the run from its last
    # complete checkpoint, at most this many times; 0 = stop at the first loss
    max_auto_resumes: int = 2
    # times Ray may restart each inference worker process that died (it gets the current weights back
    # before it serves again); -1 = no limit, 0 = a dead inference worker ends the run (auto-resume applies)
    max_infer_worker_restarts: int = 4
    # Weight syncs stream actor_train's weights to actor_infer in buckets of this many MB (ROLL's key
    # and default), one bucket copied at a time (roll/pipeline/agentic/weight_sync.py: hf_train →
    # hf_infer; other strategy pairs send the weights in one piece).
    model_update_buffer_size_mb: int = 1024
    # after every weight sync each inference rank proves, by a checksum per weight, that it holds the
    # trainer's weights; a difference stops the run naming the tensor (docs/pipeline.md)
    verify_weight_sync: bool = True

    rollout_batch_size: int = 128  # trajectories per training step
    val_batch_size: int | None = None  # trajectories per validation; default: all val envs once
    sequence_length: int = 4096  # a trajectory's whole token sequence is cut off here
    pretrain: str | None = None
    reward_pretrain: str | None = None

    ppo_epochs: int = 1
    adv_estimator: str = "gae"  # gae | reinforce | grpo
    gamma: float = 1.0
    lambd: float = 0.95
    init_kl_coef: float = 0.2
    target_kl: float | None = None  # set to use the adaptive KL controller
    kl_horizon: int = 10000
    kl_penalty: str = "kl"  # kl | abs | mse | k3
    use_kl_loss: bool = False
    kl_loss_coef: float = 0.0
    add_token_level_kl: bool = False
    pg_clip: float = 0.2
    pg_clip_low: float | None = None
    pg_clip_high: float | None = None
    dual_clip_loss: bool = False
    value_clip: float | None = 0.5
    reward_clip: float | None = None
    advantage_clip: float | None = None
    whiten_advantages: bool = False
    whiten_rewards: bool = False
    entropy_loss_coef: float = 0.0
    # Hold the policy's mean token entropy above this (0: off): a bonus of entropy_floor_coef × the
    # shortfall, measured on each micro-batch (docs/algorithms.md, "Entropy floor").
    entropy_floor: float = 0.0
    entropy_floor_coef: float = 1.0
    # The floor's bonus only on response tokens whose entropy is at least this (nats; 0: every token): a
    # bonus on the tokens every reply shares, such as a closed tag, broadens the format, not the choice
    # (docs/algorithms.md, "Entropy floor"). The floor is still measured over every token.
    entropy_floor_min_token_entropy: float = 0.0
    # Response tokens whose entropy under the policy is below this (nats; 0: off) take no policy-gradient
    # term: the tokens every reply shares, such as a closed tag, are not pushed by each reply's advantage
    # (docs/algorithms.md, "Policy gradient on the tokens that choose").
    pg_min_token_entropy: float = 0.0
    loss_agg_mode: str = "seq-mean-token-mean"
    max_grad_norm: float = 1.0
    critic_warmup: int = 0
    # Score old log-probs in their own forward pass even in a single update, and apply
    # train_infer_correction on the driver against them (ROLL's meaning; docs/algorithms.md).
    enable_old_logprobs_recompute: bool = False
    # IS weights / filters between infer_logprobs (generation) and old_logprobs (docs/algorithms.md)
    train_infer_correction: TrainInferCorrectionConfig = field(default_factory=TrainInferCorrectionConfig)
    # 0: synchronous. k ≥ 1: rollout runs ahead of training; no sample generated with weights more
    # than k versions behind the trainer is trained on (docs/pipeline.md, "Asynchronous training").
    async_generation_ratio: float = 0
    async_wait_timeout_s: float = 3600.0  # longest any wait of the async loop may take before the run fails
    reward_normalization: RewardNormalizationConfig = field(default_factory=RewardNormalizationConfig)
    rollout_dump_dir: str | None = None  # write every training rollout batch here (one file per step)
    rollout_mock: RolloutMockConfig | None = None  # dump rollouts, or train on dumped ones without generating
