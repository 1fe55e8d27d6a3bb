"""The launchers' shared body: parse `--config-path/--config-name` and Hydra overrides, load and check
the config before any worker starts, start (or join) Ray, build the pipeline class and run it."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from roll.configs.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parent.parent
logger = logging.getLogger("roll")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Run a roll pipeline from a Hydra YAML config.")
    parser.add_argument("--config-path", "--config_path", dest="config_path", required=True,
                        help="folder of the YAML (absolute, or relative to the current folder, the repo root or examples/)")
    parser.add_argument("--config-name", "--config_name", dest="config_name", required=True,
                        help="YAML file name without .yaml")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides such as exp_name=x seed=123 actor_train.training_args.learning_rate=1e-5")
    return parser.parse_args(argv)


def setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    for noisy in ("httpx", "urllib3", "filelock"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def import_class(path: str) -> type:
    from hydra.utils import get_class

    try:
        return get_class(path)
    except (ImportError, ValueError) as error:
        raise ConfigError(f"pipeline_cls: cannot import {path!r} ({error}); give a full import path such as roll.pipeline.agentic.agentic_pipeline.AgenticPipeline") from None


def init_ray(system_envs: dict[str, str]) -> None:
    """Joins the cluster at RAY_ADDRESS when set, else starts a local one; workers import roll from this checkout."""
    import ray

    if ray.is_initialized():
        return
    env_vars = {"PYTHONPATH": os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p), **system_envs}
    runtime_env = {"env_vars": env_vars}
    if os.environ.get("RAY_ADDRESS"):
        ray.init(address=os.environ["RAY_ADDRESS"], runtime_env=runtime_env, log_to_driver=True)
        return
    # A local cluster lives only for this run and listens on this machine; token auth adds nothing here.
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    env_vars.setdefault("RAY_AUTH_MODE", os.environ["RAY_AUTH_MODE"])
    kwargs = {"include_dashboard": False, "runtime_env": runtime_env, "log_to_driver": True}
    if os.environ.get("ROLL_RAY_TEMP_DIR"):
        kwargs["_temp_dir"] = os.environ["ROLL_RAY_TEMP_DIR"]
    ray.init(**kwargs)


def main(argv: list[str], default_pipeline: str) -> int:
    setup_logging()
    args = parse_args(argv)
    from roll.configs.runtime_checks import check_runnable
    from roll.pipeline.agentic.agentic_config import load_agentic_config

    try:
        config = load_agentic_config(args.config_path, args.config_name, args.overrides)
        check_runnable(config)
        pipeline_cls = import_class(config.pipeline_cls or default_pipeline)
    except ConfigError as error:
        print(f"\nConfig error: {error}\n", file=sys.stderr)
        return 2
    os.environ.update(config.system_envs)
    init_ray(config.system_envs)
    pipeline = pipeline_cls(config)
    pipeline.run()
    return 0
