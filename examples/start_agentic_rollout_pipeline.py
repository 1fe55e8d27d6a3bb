"""Run rollouts only (no training) and write the trajectories, with the same configs as training.

    python examples/start_agentic_rollout_pipeline.py --config-path examples/smollm2-135M-agentic_cpu \
        --config-name agent_val_frozen_lake
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from roll.launch.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], default_pipeline="roll.pipeline.agentic.agentic_rollout_pipeline.AgenticRolloutPipeline",
                  rollout_only=True))
