"""TextWorld text adventures behind roll's env contract.

A game is generated from a seed with TextWorld's generator (rooms, objects, a quest of
``quest_length`` steps), compiled once to a ``.z8`` file in the cache dir and replayed from there.
The model answers ``<answer>command</answer>`` (e.g. ``go east``, ``take key``); the observation is
the game's text with the banner art and the status line (``> -= Room =-0/1``) removed, plus the
admissible commands when ``show_admissible_commands`` is set. Reward per step: TextWorld's
intermediate reward (or the score change); the episode ends when the game is won or lost.
"""

from __future__ import annotations

import os
import random
import re
import tempfile
from pathlib import Path
from typing import Any, Optional

from roll.agentic.env.base import BaseEnv, StepOutcome
from roll.agentic.env.textworld.config import TextWorldEnvConfig

INSTALL_HINT = "bash scripts/install_textworld.sh, or pip install 'roll[textworld]' (textworld 1.7.0; building its jericho dependency needs gcc and make)"
# the prompt and the status line TextWorld's games print after each turn: ">   -= Attic =-0/2"
_STATUS_LINE = re.compile(r"\n*>\s*(-=.*?=-\s*\d+/\d+)?\s*$", re.DOTALL)
_NOT_A_COMMAND = re.compile(r"[<>\x00-\x1f\x7f]")
_BANNER_LINE = re.compile(r"^[\s$\\|_/<>]*$")  # a line of the ASCII-art title


def import_textworld() -> Any:
    try:
        import textworld
        import textworld.generator
    except ImportError as exc:
        raise ImportError(f"env_type 'textworld' needs the optional package textworld, which is not importable ({exc}). "
                          f"Install it with: {INSTALL_HINT}") from None
    return textworld


def default_cache_dir() -> Path:
    return Path(os.environ.get("ROLL_CACHE_DIR", Path.home() / ".cache" / "roll")) / "textworld"


def game_file(config: TextWorldEnvConfig, game_seed: int) -> Path:
    """The compiled game of ``game_seed`` (generated and compiled on first use; same seed, same game)."""
    textworld = import_textworld()
    cache = Path(config.cache_dir) if config.cache_dir else default_cache_dir()
    name = f"r{config.nb_rooms}-o{config.nb_objects}-q{config.quest_length}-s{game_seed}"
    target = cache / f"{name}.z8"
    if target.is_file() and target.with_suffix(".json").is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    options = textworld.generator.GameOptions()
    options.seeds = game_seed
    options.nb_rooms, options.nb_objects, options.quest_length = config.nb_rooms, config.nb_objects, config.quest_length
    # compile into a private folder, then move: concurrent workers never read a half-written game
    with tempfile.TemporaryDirectory(dir=cache, prefix=f".{name}-") as staging:
        options.path = str(Path(staging) / f"{name}.z8")
        options.force_recompile = True
        compiled = Path(textworld.generator.compile_game(textworld.generator.make_game(options), options))
        os.replace(compiled.with_suffix(".json"), target.with_suffix(".json"))
        os.replace(compiled, target)
    return target


def clean_feedback(text: str) -> str:
    """The game's text without the title art, the prompt and the status line."""
    text = _STATUS_LINE.sub("", text)
    lines = text.split("\n")
    if sum(1 for line in lines if line.strip() and _BANNER_LINE.match(line)) >= 5:  # the intro's title art
        lines = [line for line in lines if not _BANNER_LINE.match(line) or not line.strip()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


class TextWorldEnv(BaseEnv):
    config_cls = TextWorldEnvConfig
    config: TextWorldEnvConfig
    extra_metrics_agg_mode = {"score": "last"}

    def __init__(self, config: Optional[TextWorldEnvConfig] = None, **config_kwargs: Any) -> None:
        super().__init__(config, **config_kwargs)
        self.textworld = import_textworld()
        self.game_env: Any = None
        self.game_path: Optional[Path] = None
        self.feedback = ""
        self.admissible: list[str] = []
        self.walkthrough: list[str] = []
        self.policy: list[str] = []
        self.score = 0.0
        self.won = self.lost = False

    def _requested_infos(self) -> Any:
        return self.textworld.EnvInfos(admissible_commands=True, intermediate_reward=True, won=True, lost=True,
                                       score=True, max_score=True, policy_commands=True, extras=["walkthrough"])

    def _reset(self, rng: random.Random) -> None:
        game_seed = rng.getrandbits(31)
        if self.config.num_games:
            game_seed = random.Random(f"roll.textworld:{self.seed % self.config.num_games}").getrandbits(31)
        path = game_file(self.config, game_seed)
        if path != self.game_path:
            self.close()
            self.game_env = self.textworld.start(str(path), request_infos=self._requested_infos())
            self.game_path = path
        state = self.game_env.reset()
        self.walkthrough = list(state.get("extra.walkthrough") or [])
        self._read(state)

    def _read(self, state: Any) -> None:
        self.policy = list(state.get("policy_commands") or [])
        self.feedback = clean_feedback(state.feedback or "")
        self.admissible = sorted(state.get("admissible_commands") or [])
        self.score = float(state.get("score") or 0)
        self.won, self.lost = bool(state.get("won")), bool(state.get("lost"))

    def _parse_answer(self, answer: str) -> tuple[Optional[str], Optional[str]]:
        command = " ".join(answer.split())
        if _NOT_A_COMMAND.search(command):
            return None, "a command holds no markup (< >) or control characters"
        if len(command) > self.config.max_command_chars:
            return None, f"the command is longer than {self.config.max_command_chars} characters"
        if self.config.restrict_to_admissible and command.lower() not in {c.lower() for c in self.admissible}:
            return None, f"{command[:40]!r} is not an admissible command"
        return command, None

    def _apply(self, command: str) -> StepOutcome:
        previous_score = self.score
        state, _score, done = self.game_env.step(command)
        self._read(state)
        if self.config.reward == "intermediate":
            reward = float(state.get("intermediate_reward") or 0)
        else:
            reward = self.score - previous_score
        return StepOutcome(reward=reward, terminated=bool(done or self.won or self.lost), effective=reward > 0)

    def is_success(self) -> bool:
        return self.won

    def state_metrics(self) -> dict[str, float]:
        return {"score": self.score}

    def render(self) -> str:
        if self.config.show_admissible_commands and self.admissible and not (self.won or self.lost):
            return f"{self.feedback}\n\nAdmissible commands: {', '.join(self.admissible)}"
        return self.feedback

    def default_instruction(self) -> str:
        return ("You are playing a text adventure. Read the observation, then give one command (such as "
                "'go east', 'take key', 'open chest with key') to reach the objective.")

    def instruction_extras(self) -> str:
        try:
            return f"Answer format: {self.format_answer('look')}"
        except ValueError:
            return ""

    def random_answer(self, rng: random.Random) -> str:
        return rng.choice(self.admissible or ["look"])

    def optimal_answer(self) -> Optional[str]:
        """The game's own winning policy from the current state (TextWorld's walkthrough at the start)."""
        return self.policy[0] if self.policy else None

    def close(self) -> None:
        if self.game_env is not None:
            self.game_env.close()
            self.game_env = None
            self.game_path = None
