"""AgenticRolloutPipeline: rollouts only, no training. Plays `val_env_manager` (or `train_env_manager`
when val has no tags) with the actor_infer policy and writes, under `output_dir/rollouts/`:
  trajectories.jsonl  one line per trajectory: ids, tag, seed, messages, actions, rewards, score, metrics
  summary.md / .json  one row per tag: episodes, success, score, actions, valid actions, response length
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from roll.distributed.cluster import Cluster, cpu_count
from roll.models.resolve import resolve_model_path
from roll.pipeline.agentic.builders import engine_defaults
from roll.pipeline.agentic.rollout_scheduler import RolloutScheduler
from roll.workers.infer_worker import InferWorker

logger = logging.getLogger(__name__)
SUMMARY_COLUMNS = ("episodes", "success", "score", "num_actions", "action_is_valid", "response_length")


def summarize(records: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per-tag means of the headline metrics."""
    table: dict[str, dict[str, float]] = {}
    for tag in sorted({r["tag"] for r in records}):
        rows = [r for r in records if r["tag"] == tag]
        mean = lambda values: sum(values) / len(values)  # noqa: E731
        table[tag] = {
            "episodes": float(len(rows)),
            "success": mean([r["metrics"].get("success", 0.0) for r in rows]),
            "score": mean([r["score"] for r in rows]),
            "num_actions": mean([r["metrics"].get("num_actions", 0.0) for r in rows]),
            "action_is_valid": mean([r["metrics"].get("action_is_valid", 0.0) for r in rows]),
            "response_length": mean([r["response_tokens"] for r in rows]),
        }
    return table


def summary_markdown(table: dict[str, dict[str, float]]) -> str:
    lines = ["| tag | " + " | ".join(SUMMARY_COLUMNS) + " |", "|---|" + "---:|" * len(SUMMARY_COLUMNS)]
    for tag, row in table.items():
        cells = [f"{int(row['episodes'])}"] + [f"{row[c]:.3f}" for c in SUMMARY_COLUMNS[1:]]
        lines.append(f"| {tag} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


class AgenticRolloutPipeline:
    def __init__(self, config: Any) -> None:
        self.config = config

    def _env_manager(self) -> tuple[Any, str]:
        val = self.config.val_env_manager
        if val is not None and val.tags:
            return val, "val"
        return self.config.train_env_manager, "train"

    def run(self) -> dict[str, dict[str, float]]:
        import ray

        cfg = self.config
        model_path = resolve_model_path(cfg.actor_infer.model_args.model_name_or_path or cfg.pretrain)
        env_manager, mode = self._env_manager()
        executor = "ray" if ray.is_initialized() else "local"
        # leave a core to the env workers and this driver: an OpenMP thread that loses its core stalls
        # every op of the decode loop (measured: 2 threads on a busy 2-core machine run ~20x slower than 1)
        threads = max(1, (cpu_count() - 1) // cfg.actor_infer.num_workers)
        infer = Cluster("actor_infer", InferWorker, cfg.actor_infer, executor=executor, threads_per_worker=threads,
                        model_path=model_path, seed=cfg.seed, **engine_defaults(cfg))
        n = cfg.val_batch_size if mode == "val" and cfg.val_batch_size else env_manager.num_env_groups * env_manager.group_size
        scheduler = RolloutScheduler(env_manager, cfg.custom_envs, cfg.sequence_length, cfg.seed, model_path,
                                     infer=infer, mode=mode, executor=executor,
                                     generating_args=cfg.actor_infer.generating_args)
        try:
            start = time.perf_counter()
            batch = scheduler.get_batch(n, step=0)
            elapsed = time.perf_counter() - start
        finally:
            scheduler.shutdown()
            infer.shutdown()
        records = [
            {"traj_id": batch["traj_id"][i], "traj_group_id": batch["traj_group_id"][i], "tag": batch["tag"][i],
             "env_seed": batch["env_seed"][i], "messages": batch["messages"][i], "actions": batch["actions"][i],
             "rewards": batch["step_rewards"][i], "score": float(batch["scores"][i]), "metrics": batch["env_metrics"][i],
             "response_tokens": int(batch["response_mask"][i].sum())}
            for i in range(len(batch))
        ]
        table = summarize(records)
        out_dir = Path(cfg.output_dir) / "rollouts"
        out_dir.mkdir(parents=True, exist_ok=True)
        with open(out_dir / "trajectories.jsonl", "w") as f:
            for record in records:
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
        markdown = summary_markdown(table)
        (out_dir / "summary.md").write_text(markdown + "\n")
        (out_dir / "summary.json").write_text(json.dumps({"tags": table, "rollout": dict(batch.info)}, indent=2))
        print(f"\n{len(records)} trajectories in {elapsed:.1f}s ({mode} envs) -> {out_dir}\n{markdown}\n")
        return table
