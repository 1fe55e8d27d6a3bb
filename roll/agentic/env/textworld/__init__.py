"""The TextWorld adapter (``env_type: textworld``): text adventures generated from a seed."""
