"""The Python tool's sandbox refuses what it must: network, writes outside its work dir, runaway
time and memory. Each refusal is checked against the same action working outside the sandbox (or
inside its work dir), so a test cannot pass because the action was impossible anyway."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from roll.agentic.env.tool_use.sandbox import SandboxLimits, run_python, sandbox_unavailable_reason

if sandbox_unavailable_reason():  # a property of the machine (no namespaces), not of roll: say why
    pytest.skip(f"the Python tool sandbox cannot run here: {sandbox_unavailable_reason()}", allow_module_level=True)

LIMITS = SandboxLimits(timeout_s=5.0)


def test_code_runs_and_sees_its_files_in_its_work_dir():
    result = run_python("import os\nprint(sorted(os.listdir('.')), open('data.txt').read())", LIMITS, {"data.txt": "hello"})
    assert result.ok, result.output
    assert result.output.strip() == "['data.txt', 'main.py'] hello"


def test_a_network_connection_fails():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\nprint('connected')"
    try:
        # the same code outside the sandbox connects
        outside = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
        assert outside.stdout.strip() == "connected"
        server.accept()[0].close()
        result = run_python(code, LIMITS)
        with pytest.raises(socket.timeout):
            server.accept()  # nothing reached the host's socket
    finally:
        server.close()
    assert not result.ok and "connected" not in result.output
    assert "Network is unreachable" in result.output
    assert "Network is unreachable" in run_python("import urllib.request\nurllib.request.urlopen('http://1.1.1.1', timeout=2)", LIMITS).output


def test_writes_outside_the_work_dir_fail_and_inside_succeed(tmp_path):
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    os.chmod(tmp_path, 0o777)
    os.chmod(open_dir, 0o777)  # writable by anyone: only the sandbox can stop the write
    targets = [open_dir / "escaped.txt", Path("/tmp") / f"roll-sandbox-escape-{os.getpid()}", Path.cwd() / "escaped.txt",
               Path("/dev/shm") / f"roll-escape-{os.getpid()}"]
    code = "\n".join(
        f"try:\n    open({str(t)!r}, 'w').write('x')\n    print('WROTE', {str(t)!r})\nexcept OSError as e:\n    print('refused', e.errno)"
        for t in targets
    ) + "\nopen('inside.txt', 'w').write('ok')\nprint(open('inside.txt').read())"
    result = run_python(code, LIMITS)
    assert result.ok, result.output
    assert "WROTE" not in result.output and result.output.count("refused") == len(targets)
    assert result.output.strip().endswith("ok")
    assert not any(t.exists() for t in targets)


def test_an_infinite_loop_and_its_children_are_killed_at_the_time_limit():
    marker = "31.4159"  # a sleep nobody else runs
    code = f"import subprocess\nsubprocess.Popen(['sleep', '{marker}'])\nprint('looping', flush=True)\nwhile True:\n    pass"
    start = time.monotonic()
    result = run_python(code, SandboxLimits(timeout_s=1.5))
    assert result.timed_out and result.exit_code < 0
    assert 1.4 < time.monotonic() - start < 6
    assert "looping" in result.output and "TimeoutError" in result.output
    time.sleep(0.2)
    running = [Path(p, "cmdline").read_bytes() for p in Path("/proc").glob("[0-9]*") if (Path(p) / "cmdline").exists()]
    assert not any(marker.encode() in cmdline for cmdline in running)


def test_memory_beyond_the_limit_is_refused():
    small = SandboxLimits(timeout_s=5.0, memory_mb=256)
    assert run_python("x = bytearray(64 * 2**20)\nprint(len(x))", small).output.strip() == str(64 * 2**20)
    result = run_python("x = bytearray(1024 * 2**20)\nprint('allocated')", small)
    assert not result.ok and "MemoryError" in result.output and "allocated" not in result.output


def test_output_is_cut_to_the_limit():
    result = run_python("print('y' * 100000)", SandboxLimits(max_output_chars=100))
    assert result.ok and result.output.startswith("y" * 100) and "cut at 100 characters" in result.output
    assert len(result.output) < 200


@pytest.mark.skipif(os.geteuid() != 0, reason="the unprivileged user is used when roll runs as root")
def test_code_runs_unprivileged_and_cannot_read_root_only_files():
    result = run_python("import os\nprint(os.getuid())\nopen('/etc/shadow').read()", LIMITS)
    assert result.output.splitlines()[0] == "65534"
    assert "PermissionError" in result.output
