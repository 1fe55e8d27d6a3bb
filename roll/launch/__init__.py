"""The top layer: what runs before any worker starts. The command line (cli.py), Hydra loading and
composition (loader.py), validation (validation.py), the machine checks and memory estimate
(runtime_checks.py, memory_estimate.py) and `--cpu` (cpu_mode.py). It may import every layer below;
nothing below imports it."""

from roll.launch.cli import init_ray, main

__all__ = ["init_ray", "main"]
