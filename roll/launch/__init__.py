"""The top layer: what runs before any worker starts. The command line (cli.py, `main`), Hydra loading
and composition (loader.py), validation (validation.py), the machine checks and memory estimate
(runtime_checks.py, memory_estimate.py) and `--cpu` (cpu_mode.py). It may import every layer below;
nothing below imports it. The package imports none of its modules itself, so a script can use one
(the GPU check uses memory_estimate.py) without Hydra installed."""
