"""The launcher: overrides reach the pipeline, `pipeline_cls` picks the class, Ray is up, models resolve."""

import json
import os
import subprocess
import sys
import tempfile

import pytest

from tests.conftest import REPO_ROOT


@pytest.mark.parametrize("flag_style", ["--config-path", "--config_path"])
def test_launcher_passes_overrides_to_the_named_pipeline_class(tiny_model_dir, flag_style):
    work = tempfile.mkdtemp(prefix="launch", dir="/tmp")
    name_flag = flag_style.replace("path", "name")
    args = [sys.executable, "examples/start_agentic_pipeline.py", flag_style, "smollm2-135M-agentic_cpu", name_flag,
            "agent_val_frozen_lake", "+pipeline_cls=tests.pipeline.recording_pipeline.RecordingPipeline",
            f"pretrain={tiny_model_dir}", "seed=123", "exp_name=my_new_experiment", f"output_dir={work}",
            "actor_train.training_args.learning_rate=1e-5", "+system_envs.ROLL_TEST_MARKER=seen"]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "ROLL_RAY_TEMP_DIR": f"{work}/ray"}
    result = subprocess.run(args, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(open(f"{work}/record.json").read())
    assert record == {"exp_name": "my_new_experiment", "seed": 123, "learning_rate": pytest.approx(1e-5),
                      "model": str(tiny_model_dir.resolve()), "ray_initialized": True, "system_env": "seen"}


def test_unknown_pipeline_class_is_a_config_error(tiny_model_dir):
    args = [sys.executable, "examples/start_agentic_pipeline.py", "--config-path", "examples/smollm2-135M-agentic_cpu",
            "--config-name", "agent_val_frozen_lake", "+pipeline_cls=roll.nowhere.Pipeline", f"pretrain={tiny_model_dir}"]
    result = subprocess.run(args, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    assert "pipeline_cls" in result.stderr and "roll.nowhere.Pipeline" in result.stderr


def test_a_local_cluster_runs_its_workers_at_the_users_priority():
    # Ray's default puts workers at nice 15; in its own process so the suite's Ray session is not joined
    probe = ("import os\nfrom roll.launch.cli import init_ray\nimport ray\ninit_ray({})\n"
             "print('worker niceness', ray.get(ray.remote(lambda: os.nice(0)).remote()), 'driver', os.nice(0))\n"
             "ray.shutdown()\n")
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_worker_niceness")}
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    driver = int(out.stdout.split()[-1])
    assert f"worker niceness {driver} driver {driver}" in out.stdout
