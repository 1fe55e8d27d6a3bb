"""render_mode rgb_array: Sokoban and FrozenLake observe their board as an RGB image that shows, cell by
cell, exactly what the text render shows; text stays the default, and envs that cannot draw refuse it."""

import numpy as np
import pytest

from roll.agentic.env import make_env
from roll.agentic.env.grid_image import FROZEN_LAKE_TILES, SOKOBAN_TILES, TILE_PX


def read_board(image: np.ndarray, tiles: dict) -> list[list[int]]:
    """The cell codes an image shows, read from each tile's corner (background) and centre (foreground)."""
    inverse = {(bg, fg or bg): code for code, (bg, fg) in tiles.items()}
    rows, cols = image.shape[0] // TILE_PX, image.shape[1] // TILE_PX
    return [[inverse[(tuple(int(v) for v in image[r * TILE_PX, c * TILE_PX]),
                      tuple(int(v) for v in image[r * TILE_PX + TILE_PX // 2, c * TILE_PX + TILE_PX // 2]))]
             for c in range(cols)] for r in range(rows)]


def text_board(text: str, lookup: dict[int, str]) -> list[list[int]]:
    symbols = {symbol: code for code, symbol in lookup.items()}
    return [[symbols[ch] for ch in line] for line in text.split("\n")]


@pytest.mark.parametrize("env_type, env_config, tiles, moves", [
    ("sokoban", {"dim_room": [6, 6], "num_boxes": 1, "max_steps": 12}, SOKOBAN_TILES,
     ["Up", "Left", "Down", "Right"] * 3),
    ("sokoban", {"dim_room": [7, 8], "num_boxes": 2, "max_steps": 12}, SOKOBAN_TILES, ["Right", "Down", "Left"] * 4),
    ("frozen_lake", {"size": 5, "is_slippery": False, "max_steps": 12}, FROZEN_LAKE_TILES,
     ["Right", "Down", "Down", "Right", "Down", "Right", "Down", "Right"]),
])
def test_the_image_is_the_text_board_cell_by_cell(env_type, env_config, tiles, moves):
    text_env = make_env(env_type, **env_config)
    image_env = make_env(env_type, **env_config, render_mode="rgb_array")
    for seed in range(5):
        text, _ = text_env.reset(seed)
        image, _ = image_env.reset(seed)
        for move in moves:
            assert isinstance(image, np.ndarray) and image.dtype == np.uint8 and image.shape[2] == 3
            lookup = text_env.config.grid_lookup
            assert read_board(image, tiles) == text_board(text, lookup)
            text, _, done, truncated, _ = text_env.step(f"<answer>{move}</answer>")
            image, _, image_done, image_truncated, _ = image_env.step(f"<answer>{move}</answer>")
            assert (done, truncated) == (image_done, image_truncated)
            if done or truncated:
                break


def test_text_stays_the_default_and_a_text_only_env_refuses_rgb_array():
    obs, _ = make_env("sokoban").reset(0)
    assert isinstance(obs, str)
    with pytest.raises(ValueError, match="render_mode"):
        make_env("countdown", render_mode="rgb_array")
    with pytest.raises(ValueError, match="render_mode"):
        make_env("sokoban", render_mode="pixels")
    with pytest.raises(ValueError, match="describe_last_move"):
        make_env("frozen_lake", render_mode="rgb_array", describe_last_move=True)
