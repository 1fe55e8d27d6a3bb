"""InferWorker: the actor_infer role. A plain class (the Cluster hosts it as a Ray actor) that wraps
the inference strategy named by `strategy_args.strategy_name` (roll.strategies.create_infer_strategy).

Env managers call `generate` from many threads at once; the engine batches their requests together.
Host it with Ray option `max_concurrency` >= the number of env managers that talk to it
(`InferWorker.RAY_ACTOR_OPTIONS`), or their calls queue one by one and batching is lost.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from roll.configs.worker_config import WorkerConfig
from roll.distributed.cluster import replayed_on_restart, restores_state
from roll.strategies import create_infer_strategy
from roll.utils.shared_weights import SharedWeights
from roll.utils.weight_checksum import ChecksumMismatch, compare_checksums, fold_checksums


class InferWorker:
    RAY_ACTOR_OPTIONS = {"max_concurrency": 1024}

    def __init__(self, worker_config: WorkerConfig, rank: int = 0, world_size: int = 1,
                 model_path: str | Path | None = None, num_threads: int | None = None, seed: int = 0,
                 max_sessions: int = 64, max_batch_size: int = 64, max_model_len: int = 4096) -> None:
        path = model_path or worker_config.model_args.model_name_or_path
        if not path:
            raise ValueError("InferWorker needs model_args.model_name_or_path (or model_path)")
        if num_threads:
            torch.set_num_threads(num_threads)
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        self.rank, self.world_size = rank, world_size
        device = f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_available() else "cpu"
        self.strategy = create_infer_strategy(
            worker_config.strategy_args.strategy_name,
            str(path),
            dtype=worker_config.model_args.dtype,
            attn_implementation=worker_config.model_args.attn_implementation,
            device=device,
            strategy_config=worker_config.strategy_args.strategy_config,
            max_batch_size=max_batch_size,
            max_sessions=max_sessions,
            max_model_len=max_model_len,
            seed=seed + rank,
        )
        self.version = 0

    def generate(self, requests: list[dict]) -> list[dict]:
        return self.strategy.generate(requests)

    def release(self, session_ids: list[str]) -> None:
        self.strategy.release(session_ids)

    @replayed_on_restart  # a restarted worker gets the current weights before it generates again
    def update_weights(self, state_dict: dict[str, torch.Tensor], version: int) -> None:
        """All the weights at once; the Cluster keeps this call to give a restarted worker (async training)."""
        self.load_weights(state_dict, version)

    @restores_state  # the pipeline streams the current weights to a restarted worker (weight_sync.py)
    def load_weights(self, state_dict: dict[str, torch.Tensor] | SharedWeights, version: int) -> None:
        """Some or all of the weights (one bucket of a streamed sync); the version they belong to."""
        if isinstance(state_dict, SharedWeights):
            state_dict = state_dict.tensors()  # views of Ray's store: the strategy copies them in
        self.strategy.load_state_dict(state_dict, version)
        self.version = version

    @restores_state  # the restore hook checks a restarted worker's streamed weights before it serves
    def verify_weights(self, expected: dict[str, int]) -> list[ChecksumMismatch]:
        """The weights whose checksum here differs from the trainer's `expected` ones (empty: all held).
        An engine that fuses weights (vLLM) names how the trainer's names fold into its own
        (`checksum_key`). A weight the engine cannot read back (its checksum None: vLLM's CPU build packs
        linear weights into its kernels) is left out of the comparison, not reported as different."""
        key = getattr(self.strategy, "checksum_key", None)
        if key is not None:
            expected = fold_checksums(expected, key)
        held = self.strategy.weight_checksums()
        expected = {name: value for name, value in expected.items() if not (name in held and held[name] is None)}
        return compare_checksums(expected, held)

    def get_version(self) -> int:
        return self.version

    def get_stats(self) -> dict:
        """Token counts of the engine: prefill_tokens, cached_tokens (prompt tokens reused), decode_tokens, …"""
        stats = getattr(self.strategy, "stats", None)  # vllm / sglang keep their own; hf_infer's engine has them
        return dict(stats if stats is not None else self.strategy.engine.stats)

    def shutdown(self) -> None:
        self.strategy.shutdown()
