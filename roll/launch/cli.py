"""The launchers' shared body: parse `--config-path/--config-name` and Hydra overrides, load and check
the config before any worker starts, start (or join) Ray, build the pipeline class and run it.

`--dry-run` stops after the checks: it prints the resolved config and exits 0 (valid) or 2 (refused),
starting nothing. `--cpu` first turns the config into one this machine can run (roll/launch/cpu_mode.py).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from roll.configs.errors import ConfigError
from roll.launch.cpu_mode import adjust_for_cpu, turn_off_multi_device_keys
from roll.launch.loader import load_agentic_config
from roll.launch.runtime_checks import check_runnable
from roll.pipeline.agentic.warm_start import check_resume, earlier_stages, run_earlier_stages

REPO_ROOT = Path(__file__).resolve().parents[2]
logger = logging.getLogger("roll")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Run a roll pipeline from a Hydra YAML config.")
    parser.add_argument("--config-path", "--config_path", dest="config_path", required=True,
                        help="folder of the YAML (absolute, or relative to the current folder, the repo root or examples/)")
    parser.add_argument("--config-name", "--config_name", dest="config_name", required=True,
                        help="YAML file name without .yaml")
    parser.add_argument("--dry-run", "--dry_run", dest="dry_run", action="store_true",
                        help="compose, validate and run the machine checks, print the resolved config, start nothing")
    parser.add_argument("--cpu", action="store_true",
                        help="run on CPU: hf_infer/hf_train, one worker per role, sdpa, fp32, a few groups, shorter "
                             "lengths, the embedded model unless pretrain= is given; prints each change")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides such as exp_name=x seed=123 actor_train.training_args.learning_rate=1e-5")
    return parser.parse_args(argv)


def setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    for noisy in ("httpx", "urllib3", "filelock", "matplotlib"):
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
    # Ray starts its workers at nice 15, below every other process on the machine. The run's work is in
    # those workers: beside any other busy process torch's threads then wait on each other, and a train
    # step ran 5-10x slower on 2 cores. At 0 they get a fair share, like any program the user starts.
    os.environ.setdefault("RAY_worker_niceness", "0")
    env_vars.setdefault("RAY_AUTH_MODE", os.environ["RAY_AUTH_MODE"])
    kwargs = {"include_dashboard": False, "runtime_env": runtime_env, "log_to_driver": True}
    if os.environ.get("ROLL_RAY_TEMP_DIR"):
        kwargs["_temp_dir"] = os.environ["ROLL_RAY_TEMP_DIR"]
    ray.init(**kwargs)


def load_checked(args: argparse.Namespace, rollout_only: bool):
    """The validated, machine-checked config; --cpu changes are applied and printed first."""
    changes: list[str] = []
    adjust = adjust_data = None
    if args.cpu:
        keep_pretrain = any(o.lstrip("+~").startswith("pretrain=") for o in args.overrides)
        adjust = lambda config: changes.extend(adjust_for_cpu(config, keep_pretrain))  # noqa: E731
        adjust_data = lambda data: changes.extend(turn_off_multi_device_keys(data))  # noqa: E731
    config = load_agentic_config(args.config_path, args.config_name, args.overrides, rollout_only=rollout_only,
                                 adjust=adjust, adjust_data=adjust_data)
    for line in changes:
        print(f"--cpu: {line}")
    check_runnable(config)
    return config


def print_resolved(config) -> None:
    from dataclasses import asdict

    from omegaconf import OmegaConf

    print("# resolved config\n" + OmegaConf.to_yaml(OmegaConf.create(asdict(config))))


def main(argv: list[str], default_pipeline: str, rollout_only: bool = False) -> int:
    setup_logging()
    args = parse_args(argv)
    try:
        config = load_checked(args, rollout_only)
        pipeline_cls = import_class(config.pipeline_cls or default_pipeline)
        check_resume(config)
        # warm_start_from: {config, step}: the earlier stages, loaded and checked now, run first
        stages = earlier_stages(config, lambda name: load_checked(
            argparse.Namespace(**{**vars(args), "config_name": name, "overrides": []}), rollout_only))
    except ConfigError as error:
        print(f"\nConfig error: {error}\n", file=sys.stderr)
        return 2
    if args.dry_run:
        print_resolved(config)
        for stage in stages:
            print(f"dry run: stage {stage.name} {'is done' if stage.done else 'runs first'} ({stage.checkpoint})")
        print(f"dry run: {args.config_name} is valid and this machine can run it ({pipeline_cls.__name__}); nothing was started.")
        return 0
    os.environ.update(config.system_envs)
    run_earlier_stages(stages, lambda stage: run_resuming(stage, import_class(stage.pipeline_cls or default_pipeline)))
    run_resuming(config, pipeline_cls)
    return 0


def run_resuming(config, pipeline_cls: type) -> None:
    """Runs the pipeline; when a worker is lost for good (Ray's RayActorError reaches the driver: a
    training worker died, its state with it), ends this run's workers and starts again from the last
    complete checkpoint, at most `max_auto_resumes` times, then fails with the history."""
    import ray

    history: list[str] = []
    while True:
        init_ray(config.system_envs)
        try:
            pipeline = pipeline_cls(config)
            pipeline.auto_resumes = len(history)  # AgenticPipeline logs it with every step (system/auto_resumes)
            pipeline.run()
            return
        except ray.exceptions.RayActorError as error:
            history.append(f"{type(error).__name__}: {str(error).splitlines()[0][:300]}")
            # disconnecting the driver ends every worker it started (a local Ray stops altogether)
            ray.shutdown()
            if len(history) > config.max_auto_resumes:
                raise RuntimeError(f"workers were lost {len(history)} times (max_auto_resumes={config.max_auto_resumes}):\n"
                                   + "\n".join(f"  {i + 1}. {h}" for i, h in enumerate(history))) from error
            logger.warning("a worker was lost (%s); resuming from the last checkpoint (%d of max_auto_resumes=%d)",
                           history[-1], len(history), config.max_auto_resumes)
            config.resume_from_checkpoint = True
