"""`render_mode: rgb_array` for the grid envs: the board as an RGB image, one square tile per cell.

Each cell code is drawn as a tile of `TILE_PX` pixels: a background colour over the whole tile and,
for cells that hold something (the player, a box), a foreground square inset by a quarter of the
tile. The two colours together name the code, so the image shows exactly the board the text render
shows (tests read it back cell by cell). No image assets: plain numpy.
"""

from __future__ import annotations

import numpy as np

TILE_PX = 16  # gym-sokoban's tile size; a 6x6 room is a 96x96 image
RGB = tuple[int, int, int]

# Sokoban codes (sokoban/config.py): 0 wall, 1 empty, 2 target, 3 box on target, 4 box, 5 player, 6 player on target
_FLOOR, _WALL, _TARGET = (40, 40, 40), (120, 72, 40), (200, 40, 40)
_BOX, _PLAYER = (230, 190, 40), (40, 200, 80)
SOKOBAN_TILES: dict[int, tuple[RGB, RGB | None]] = {
    0: (_WALL, None), 1: (_FLOOR, None), 2: (_TARGET, None), 3: (_TARGET, _BOX),
    4: (_FLOOR, _BOX), 5: (_FLOOR, _PLAYER), 6: (_TARGET, _PLAYER),
}

# FrozenLake codes (frozen_lake/config.py): 0 player, 1 frozen, 2 hole, 3 goal, 4 player in hole, 5 player on goal
_ICE, _HOLE, _GOAL, _AGENT = (170, 210, 240), (20, 30, 90), (60, 180, 60), (220, 60, 60)
FROZEN_LAKE_TILES: dict[int, tuple[RGB, RGB | None]] = {
    0: (_ICE, _AGENT), 1: (_ICE, None), 2: (_HOLE, None), 3: (_GOAL, None), 4: (_HOLE, _AGENT), 5: (_GOAL, _AGENT),
}


def draw_grid(codes: list[list[int]], tiles: dict[int, tuple[RGB, RGB | None]], tile_px: int = TILE_PX) -> np.ndarray:
    """`[rows * tile_px, cols * tile_px, 3]` uint8: the tile of each code (background, inset foreground)."""
    rows, cols = len(codes), len(codes[0])
    image = np.zeros((rows * tile_px, cols * tile_px, 3), dtype=np.uint8)
    inset = tile_px // 4
    for r, row in enumerate(codes):
        for c, code in enumerate(row):
            background, foreground = tiles[code]
            top, left = r * tile_px, c * tile_px
            image[top:top + tile_px, left:left + tile_px] = background
            if foreground is not None:
                image[top + inset:top + tile_px - inset, left + inset:left + tile_px - inset] = foreground
    return image
