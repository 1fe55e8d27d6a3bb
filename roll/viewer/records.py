"""The saved trajectories the report shows: a few episodes per step (and per validation) as JSON.

`logging_dir/trajectories/step_NNNNN.json` (training) and `val_NNNNN.json` (validation) hold one
record per episode: the conversation, actions, step rewards, env metrics, score, the extras a custom
env manager added to its trajectories, and for the viewer
each turn's board, reply, parsed action, validity and reward, plus the trajectory's tokens (text,
response mask, the log-probs the inference worker sampled them with).

The per-turn board and parsed action come from replaying the episode in the driver: the env
contract (roll/agentic/env/base.py) makes an episode a function of its seed and the replies, and a
FrozenLake or Sokoban step costs microseconds. A replay whose rewards differ from the recorded ones
(an env that is not deterministic) keeps the replies and rewards and says why the boards are missing.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roll.agentic.env import make_env
from roll.data.batch import Batch
from roll.data.episodes import batch_episode_keys

if TYPE_CHECKING:
    from roll.configs.agentic_config import AgenticConfig

logger = logging.getLogger(__name__)


def trajectory_file(logging_dir: str | Path, kind: str, step: int) -> Path:
    return Path(logging_dir) / "trajectories" / f"{'val' if kind == 'val' else 'step'}_{step:05d}.json"


class TrajectoryRecorder:
    """Writes the first `report.trajectories_per_step` (or `report.val_trajectories`) episodes of a batch."""

    def __init__(self, config: "AgenticConfig") -> None:
        self.logging_dir = Path(config.logging_dir)
        self.counts = {"train": config.report.trajectories_per_step, "val": config.report.val_trajectories}
        self.custom_envs = config.custom_envs
        self.format_penalty = {"train": config.train_env_manager.format_penalty, "val": config.val_env_manager.format_penalty}
        self.tokenizer_path = config.actor_infer.model_args.model_name_or_path
        self._tokenizer = None

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self.tokenizer_path)
        return self._tokenizer

    def save(self, batch: Batch, step: int, kind: str = "train") -> Path | None:
        # whole episodes: a step-wise batch holds one sample per turn, and each is saved
        episodes = batch_episode_keys(batch)
        kept = set(list(dict.fromkeys(episodes))[: self.counts[kind]])
        if not kept:
            return None
        rows = [self.record(batch, i, step, kind) for i in range(len(batch)) if episodes[i] in kept]
        path = trajectory_file(self.logging_dir, kind, step)
        path.parent.mkdir(parents=True, exist_ok=True)
        # one episode per line: readable with any JSON tool, and token lists stay one line each
        path.write_text("[\n" + ",\n".join(json.dumps(row, ensure_ascii=False) for row in rows) + "\n]\n")
        return path

    def record(self, batch: Batch, i: int, step: int, kind: str) -> dict[str, Any]:
        row: dict[str, Any] = {"kind": kind, "step": step}
        # every meta column: the trajectory's fields and any extras a user's env manager added
        row.update({key: _plain(batch.meta[key][i]) for key in batch.meta if key != "vision"})
        if "vision" in batch.meta:  # the pixels stay out of the JSON: the replayed boards below show the same
            vision = batch.meta["vision"][i]
            row["images"] = vision.num_images if vision is not None else 0
        row["score"] = float(batch["scores"][i])
        if "response_level_rewards" in batch:
            row["reward"] = float(batch["response_level_rewards"][i])
        length = int(batch["attention_mask"][i].sum())
        ids = batch["input_ids"][i, :length].tolist()
        row["tokens"] = {
            "text": token_texts(self.tokenizer, ids, batch["response_mask"][i, :length].tolist()),
            "response_mask": batch["response_mask"][i, :length].tolist(),
            "logprobs": [round(x, 4) for x in batch["infer_logprobs"][i, :length].tolist()],
        }
        row["turns"], note = self.replay(row, kind)
        if note:
            row["turns_note"] = note
        return row

    def replay(self, row: dict[str, Any], kind: str) -> tuple[list[dict[str, Any]], str | None]:
        """Each turn's board, reply, parsed action, validity and reward, by replaying the episode."""
        replies, rewards = row.get("actions") or [], row.get("step_rewards") or []
        plain = [{"reply": text, "reward": reward} for text, reward in zip(replies, rewards)]
        spec = self.custom_envs.get(row.get("tag"))
        if spec is None or row.get("env_seed") is None:
            return plain, "no env spec or seed to replay the boards with"
        if spec.env_type is None:
            return plain, f"played by the agent runner {spec.agent_runner_cls}: no roll env to replay the boards with"
        env_kwargs = dict(spec.env_config)  # as the env manager builds it (env_manager/traj_env_manager.py)
        if self.format_penalty[kind] is not None:
            env_kwargs["format_penalty"] = self.format_penalty[kind]
        if env_kwargs.get("render_mode") == "rgb_array":
            env_kwargs["render_mode"] = "text"  # the report shows boards as text: the same board the image drew
        try:
            env = make_env(spec.env_type, **env_kwargs)
            board, _ = env.reset(row["env_seed"])
            turns = []
            for text, recorded in zip(replies, rewards):
                next_board, reward, _, _, info = env.step(text)
                if abs(reward - recorded) > 1e-6:
                    return plain, f"the replay's reward {reward} differs from the recorded {recorded} at turn {len(turns) + 1}"
                valid = bool(info.get("metrics", {}).get("action_is_valid", info.get("action") is not None))
                turns.append({"board": board, "reply": text, "action": info.get("action"), "valid": valid,
                              "invalid_reason": info.get("invalid_reason"), "reward": reward})
                board = next_board
            if turns:
                turns[-1]["board_after"] = board
            return turns, None
        except Exception as exc:  # a viewer aid: an env that cannot replay costs the boards, never the run
            logger.warning("could not replay episode %s for the report: %s: %s", row.get("traj_id"), type(exc).__name__, exc)
            return plain, f"replay failed: {type(exc).__name__}: {exc}"


def token_texts(tokenizer: Any, ids: list[int], response_mask: list[int]) -> list[str]:
    """The text each token adds, so that a reply's token texts join to its decoded text. A byte-level
    token that ends inside a multi-byte character adds "" and the token that completes it adds the
    character (decoding tokens one by one would show two halves as two replacement marks)."""
    texts: list[str] = []
    start = 0
    for end in range(1, len(ids) + 1):
        if end < len(ids) and response_mask[end] == response_mask[start]:
            continue
        emitted = ""
        for k in range(start, end):  # one prompt or reply segment: its decodes grow from its start
            full = tokenizer.decode(ids[start:k + 1], clean_up_tokenization_spaces=False)
            if full.endswith("\ufffd") and k + 1 < end:
                texts.append("")  # an incomplete character: the next token finishes it
            elif full.startswith(emitted):
                texts.append(full[len(emitted):])
                emitted = full
            else:
                texts.append(tokenizer.decode([ids[k]], clean_up_tokenization_spaces=False))
                emitted = full
        start = end
    return texts


def _plain(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except TypeError:
        return str(value)


def load_trajectories(logging_dir: str | Path) -> list[dict[str, Any]]:
    """Every saved episode of a run in the order things happened: by step, a step's validation first."""
    folder = Path(logging_dir) / "trajectories"
    episodes = []
    paths = sorted(folder.glob("*.json"), key=lambda p: (int(p.stem.split("_")[-1]), not p.name.startswith("val_")))
    for path in paths:
        kind = "val" if path.name.startswith("val_") else "train"
        step = int(path.stem.split("_")[-1])
        for row in json.loads(path.read_text()):
            row.setdefault("kind", kind)
            row.setdefault("step", step)
            episodes.append(row)
    return episodes
