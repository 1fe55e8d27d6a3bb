"""What the verified weight sync costs beside the sync itself, on the CPU example's model.

Builds actor_train (hf_train) and actor_infer (hf_infer) workers in this process on the embedded
SmolLM2-135M (or --model PATH), then times, --repeats times: the streamed sync of the CPU example
(buckets of model_update_buffer_size_mb = 32) and the check (the trainer's checksums in the engine's
dtype, then the engine's comparison; roll/pipeline/agentic/sync_check.py). Without Ray: a real sync
also copies each bucket through Ray's object store, so the ratio printed is an upper bound.

    .venv/bin/python benchmarks/sync_check_cost.py --repeats 3
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from roll.configs.worker_config import ModelArgs, StrategyArgs, WorkerConfig  # noqa: E402
from roll.models.embedded import prepare_embedded_model  # noqa: E402
from roll.pipeline.agentic.weight_sync import plan_buckets  # noqa: E402
from roll.workers.actor_worker import ActorWorker  # noqa: E402
from roll.workers.infer_worker import InferWorker  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="a Hugging Face folder (default: the embedded SmolLM2-135M)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bucket-mb", type=int, default=32)
    args = parser.parse_args()
    model = str(args.model or prepare_embedded_model())
    config = WorkerConfig(model_args=ModelArgs(model_name_or_path=model))
    actor = ActorWorker(dataclasses.replace(config, strategy_args=StrategyArgs(strategy_name="hf_train")))
    infer = InferWorker(dataclasses.replace(config, strategy_args=StrategyArgs(strategy_name="hf_infer")))
    buckets = plan_buckets(actor.inference_weight_bytes(), args.bucket_mb << 20)
    sync_s, check_s = [], []
    try:
        for version in range(1, args.repeats + 1):
            start = time.perf_counter()
            for names in buckets:
                infer.load_weights(actor.get_weight_bucket(names), version)
            sync_s.append(time.perf_counter() - start)
            start = time.perf_counter()
            mismatches = infer.verify_weights(actor.weight_checksums(config.model_args.dtype))
            check_s.append(time.perf_counter() - start)
            assert not mismatches, mismatches[:3]
    finally:
        infer.shutdown()
        actor.shutdown()
    sync, check = statistics.median(sync_s), statistics.median(check_s)
    print(f"{model}: {len(buckets)} buckets of <= {args.bucket_mb} MB; median of {args.repeats}: "
          f"sync {sync:.2f} s, check {check:.2f} s ({check / sync:.2f}x the sync)")
    print("sync s:", [round(s, 2) for s in sync_s], "check s:", [round(s, 2) for s in check_s])


if __name__ == "__main__":
    main()
