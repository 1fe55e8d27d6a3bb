"""What a run shows its user: saved trajectories, the HTML report, progress lines, collapse alarms.

`report:` and `alarms:` are keys of AgenticConfig (roll/configs/agentic_config.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from roll.configs.errors import ConfigError


@dataclass
class ReportConfig:
    # training episodes saved as JSON per step, each step-wise one with all its turns' samples (the report
    # shows only saved ones)
    trajectories_per_step: int = 4
    val_trajectories: int = 8  # validation episodes saved per validation (fixed seeds: the same maps every time)
    write_report: bool = True  # report.html and plots/ under logging_dir, after each validation and at the end
    # beside each validation, the success of policies that never read the map (val/blind/*), on the same maps
    map_blind_baselines: bool = True
    progress_interval_s: float = 30.0  # a progress line at least this often during long phases (logs without a terminal)

    def __post_init__(self) -> None:
        for name in ("trajectories_per_step", "val_trajectories"):
            if getattr(self, name) < 0:
                raise ConfigError(f"report.{name} must be >= 0 (0 saves none), got {getattr(self, name)}")
        if self.progress_interval_s <= 0:
            raise ConfigError(f"report.progress_interval_s must be > 0 seconds, got {self.progress_interval_s}")


@dataclass
class AlarmConfig:
    """Thresholds of the collapse alarms (roll/pipeline/agentic/alarms.py). An alarm metric `alarm/<name>` is 1.0
    on a step where it trips, and one warning line names every alarm tripped."""

    enabled: bool = True
    min_entropy: float = 0.05  # nats per token; below it the policy has stopped exploring
    max_identical_reply_share: float = 0.9  # replies that another episode of their group gave too, same turn
    max_repeated_token_share: float = 0.5  # replies made mostly of one token ("!!!!!!")
    repeated_token_fraction: float = 0.8  # a reply is "repeated-token" when one token is this share of it
    validity_drop: float = 0.3  # action validity this far below its best so far
    max_length_at_cap_share: float = 0.9  # replies cut off at the per-turn token cap
    kl_jump_factor: float = 5.0  # KL this many times its median over the previous steps...
    min_kl_jump: float = 0.01  # ...and above this floor (tiny KLs jump by large factors harmlessly)

    def __post_init__(self) -> None:
        for name in ("max_identical_reply_share", "max_repeated_token_share", "repeated_token_fraction",
                     "max_length_at_cap_share", "validity_drop"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"alarms.{name} is a share and must be within [0, 1], got {value}")
        if self.min_entropy < 0 or self.min_kl_jump < 0:
            raise ConfigError(f"alarms.min_entropy and alarms.min_kl_jump must be >= 0, got {self.min_entropy}, {self.min_kl_jump}")
        if self.kl_jump_factor <= 1.0:
            raise ConfigError(f"alarms.kl_jump_factor must be > 1 (a jump is a rise), got {self.kl_jump_factor}")
