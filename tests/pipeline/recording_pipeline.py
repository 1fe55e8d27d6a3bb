"""A pipeline class for launcher tests: it records the config it was given instead of training."""

import json
import os
from pathlib import Path


class RecordingPipeline:
    def __init__(self, config) -> None:
        self.config = config

    def run(self) -> None:
        import ray

        record = {
            "exp_name": self.config.exp_name,
            "seed": self.config.seed,
            "learning_rate": self.config.actor_train.training_args.learning_rate,
            "model": self.config.actor_train.model_args.model_name_or_path,
            "ray_initialized": ray.is_initialized(),
            "system_env": os.environ.get("ROLL_TEST_MARKER"),
        }
        Path(self.config.output_dir).mkdir(parents=True, exist_ok=True)
        (Path(self.config.output_dir) / "record.json").write_text(json.dumps(record))
