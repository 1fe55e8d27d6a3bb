"""`warm_start_from`: a new run that starts from another run's checkpoint (docs/pipeline.md).

Unlike `resume_from_checkpoint`, which continues the same run exactly and refuses a checkpoint saved
under a config that trains differently, a warm start is a new run: step 1, a fresh learning-rate
schedule (its warm-up ramps again), the KL coefficient and seeds of this config. It loads the trained
roles' weights and, with `optimizer: true`, their optimizer state and schedule position too.
"""

from __future__ import annotations

from dataclasses import dataclass

from roll.configs.errors import ConfigError


@dataclass
class WarmStartConfig:
    checkpoint: str | None = None  # a checkpoint folder (…/checkpoints/checkpoint-<step>)
    # or an earlier stage: a config in the same folder as this one, and the step of its checkpoint to
    # start from; the launcher runs that config first (resuming it) unless that checkpoint exists
    config: str | None = None
    step: int | None = None
    # also load the optimizer state (AdamW moments) and the schedule's position. Off by default: moments
    # from another run scale the first updates of this one (docs/pipeline.md, "Warm starts")
    optimizer: bool = False

    def __post_init__(self) -> None:
        if (self.checkpoint is None) == (self.config is None):
            raise ConfigError("warm_start_from: give either checkpoint (a checkpoint folder) or config and step "
                             f"(an earlier stage's config name), not {'both' if self.checkpoint else 'neither'}")
        if self.config is not None and (self.step is None or self.step < 1):
            raise ConfigError(f"warm_start_from.config={self.config!r} needs step: the step of that stage's "
                             f"checkpoint to start from (a positive integer), got {self.step!r}")
        if self.checkpoint is not None and self.step is not None:
            raise ConfigError("warm_start_from.step goes with config (an earlier stage), not with checkpoint "
                             "(a checkpoint folder already names its step)")
