"""FrozenLake: FrozenLakeEnv (env.py) and FrozenLakeEnvConfig (config.py)."""
