"""Sokoban: SokobanEnv (env.py), SokobanEnvConfig (config.py), room generator and solver (room.py)."""
