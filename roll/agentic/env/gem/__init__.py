"""The GEM adapter (``env_type: gem``): GEM's games and reasoning-gym tasks behind roll's env contract."""
