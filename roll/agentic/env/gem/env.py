"""GEM ("A Gym for Generalist LLMs", package ``gem-llm``) envs behind roll's env contract.

- Observation: GEM's reset observation holds only the instructions (and, for reasoning-gym, the
  question); the board is in ``info["suffix"]``. The first observation is instructions + suffix
  (as ROLL's GEM envs show it; the env instruction is empty unless ``env_instruction`` is set);
  later observations are GEM's step text + the new suffix.
- Answers: GEM reads the last ``\\boxed{...}`` of the reply (roll's bundled envs use ``<answer>``).
  A reply without any ``\\boxed{}`` costs roll's ``format_penalty`` and leaves the game untouched;
  any other reply goes to GEM whole, and GEM's own rules apply (a malformed boxed move may end
  the episode with GEM's -0.1).
- Seeds: GEM seeds Python's and numpy's global RNGs on reset and draws from them while playing.
  Every GEM call here holds one process-wide lock and runs on this env's own copy of those global
  states (swapped in before, saved and the caller's restored after), so envs in one worker never
  disturb each other or the caller's random draws, and the same seed gives the same episode.
"""

from __future__ import annotations

import random
import threading
from contextlib import contextmanager
from typing import Any, Iterator, Optional

import numpy as np

from roll.agentic.env.base import BaseEnv, StepOutcome
from roll.agentic.env.gem.config import GemEnvConfig

_GEM_LOCK = threading.RLock()
INSTALL_HINT = "pip install 'roll[gem]' && pip install --no-deps gem-llm==0.1.0 (scripts/bootstrap.sh does both)"


def import_gem() -> Any:
    try:
        import gem
    except ImportError as exc:
        raise ImportError(f"env_type 'gem' needs the optional GEM package (gem-llm), which is not importable ({exc}). "
                          f"Install it with: {INSTALL_HINT}") from None
    return gem


# GEM's word games read NLTK's "words" corpus and call nltk.download("words") on every construction,
# which offline fails (or hangs on a network timeout) deep inside GEM; checked first instead.
_NLTK_WORD_GAMES = ("gem.envs.game_env.wordle", "gem.envs.game_env.hangman", "gem.envs.game_env.word_search")


def _require_offline_data(gem_id: str, entry_point: Any) -> None:
    module = entry_point.split(":")[0] if isinstance(entry_point, str) else getattr(entry_point, "__module__", "")
    if module not in _NLTK_WORD_GAMES:
        return
    import nltk

    try:
        nltk.data.find("corpora/words")
    except LookupError:
        raise ValueError(
            f"GEM env {gem_id!r} needs NLTK's 'words' corpus, which is not on this machine (searched {nltk.data.path}); "
            "roll does not download it. Install it where there is network with `python -m nltk.downloader words` "
            "(or copy an nltk_data folder holding corpora/words and set NLTK_DATA to it)") from None


def make_gem_env(gem_id: str, gem_kwargs: dict[str, Any]) -> Any:
    """``gem.make``, also accepting ROLL's ``game:<Name>-v0`` ids of older GEM releases."""
    gem = import_gem()
    from gem.envs.registration import ENV_REGISTRY

    if gem_id in ENV_REGISTRY:
        _require_offline_data(gem_id, ENV_REGISTRY[gem_id].entry_point)
        return gem.make(gem_id, **gem_kwargs)
    variants = sorted(name for name in ENV_REGISTRY if name.startswith(gem_id + "-"))
    if not variants:
        known = sorted({name.rsplit("-", 1)[0] if name.startswith("game:") else name for name in ENV_REGISTRY})
        raise ValueError(f"env_config.gem_id {gem_id!r} is not a GEM env id. Known ids include: {', '.join(known[:40])} ...")
    entry_point = ENV_REGISTRY[variants[0]].entry_point
    _require_offline_data(gem_id, entry_point)
    if isinstance(entry_point, str):
        import importlib

        module_name, class_name = entry_point.split(":")
        entry_point = getattr(importlib.import_module(module_name), class_name)
    env = entry_point(**gem_kwargs)  # the class's own defaults, not one difficulty's registered kwargs
    env.env_id = gem_id
    return env


class GemEnv(BaseEnv):
    config_cls = GemEnvConfig
    config: GemEnvConfig

    def __init__(self, config: Optional[GemEnvConfig] = None, **config_kwargs: Any) -> None:
        super().__init__(config, **config_kwargs)
        self._rng_state: Optional[tuple[Any, Any]] = None  # this env's copy of the global RNG states
        with self._own_global_rng():
            self.gem_env = make_gem_env(self.config.gem_id, dict(self.config.gem_kwargs))
        self.observation = ""
        self.last_reward = 0.0
        self.solved = False

    @contextmanager
    def _own_global_rng(self) -> Iterator[None]:
        with _GEM_LOCK:
            outer = (random.getstate(), np.random.get_state())
            if self._rng_state is not None:
                random.setstate(self._rng_state[0])
                np.random.set_state(self._rng_state[1])
            try:
                yield
            finally:
                self._rng_state = (random.getstate(), np.random.get_state())
                random.setstate(outer[0])
                np.random.set_state(outer[1])

    def _reset(self, rng: random.Random) -> None:
        gem_seed = rng.getrandbits(32)  # GEM (numpy) takes seeds below 2**32
        with self._own_global_rng():
            instructions, info = self.gem_env.reset(seed=gem_seed)
        suffix = info.get("suffix", "") if isinstance(info, dict) else ""
        self.observation = f"{instructions}\n{suffix}" if suffix else str(instructions)
        self.last_reward, self.solved = 0.0, False

    def _parse_answer(self, answer: str) -> tuple[Optional[str], Optional[str]]:
        return answer, None

    def _apply(self, text: str) -> StepOutcome:
        with self._own_global_rng():
            observation, reward, terminated, truncated, info = self.gem_env.step(text)
        reward = float(reward)
        over = bool(terminated or truncated)
        suffix = info.get("suffix", "") if isinstance(info, dict) and not over else ""
        self.observation = f"{observation}\n{suffix}" if suffix else str(observation)
        self.last_reward = reward
        self.solved = over and reward >= self.config.success_reward
        return StepOutcome(reward=reward, terminated=over, effective=reward >= 0, info={"gem_truncated": bool(truncated)})

    def is_success(self) -> bool:
        return self.solved

    def render(self) -> str:
        return self.observation

    def default_instruction(self) -> str:
        return ""  # GEM's instructions open the first observation

    def instruction_extras(self) -> str:
        return ""

    def random_answer(self, rng: random.Random) -> str:
        """GEM's own random action where the env has one; else a boxed random token (well-formed
        for roll, usually an illegal move for the game)."""
        with self._own_global_rng():
            random.seed(rng.getrandbits(64))
            try:
                return str(self.gem_env.sample_random_action())
            except NotImplementedError:
                return "\\boxed{" + rng.choice(["A", "B", "C", "1", "2", "up", "A C"]) + "}"

    def close(self) -> None:
        close = getattr(self.gem_env, "close", None)
        if callable(close):
            close()
