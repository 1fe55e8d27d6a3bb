"""Runs untrusted Python (a model's tool call) in a sandbox built from Linux namespaces and rlimits.

One call = one fresh process tree started with ``unshare --net --mount --pid --fork --kill-child``:
- no network: a new network namespace holds only a loopback device that is down;
- no writes outside the work dir: in the private mount namespace every mount is remounted read-only
  and the work dir is a size-capped tmpfs (nothing the code writes reaches the disk), and the code
  runs as the unprivileged user ``nobody`` when roll runs as root;
- limits: address space (memory), CPU seconds, file size, process count, open files; a wall-clock
  limit kills the whole pid namespace (children included) at ``timeout_s``.

Without root, ``unshare --map-root-user`` gives the same namespaces where the kernel allows user
namespaces. Where neither works, building a sandbox fails with ``SandboxUnavailable`` (roll never
falls back to running model code unsandboxed).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

_LAUNCHER = Path(__file__).with_name("sandbox_launcher.py")
OUTPUT_FILE_LIMIT_BYTES = 16 * 2**20  # the captured stdout+stderr file; rlimit FSIZE also caps it


class SandboxUnavailable(RuntimeError):
    """This machine cannot build the namespace sandbox (no unshare, or namespaces not permitted)."""


@dataclass(frozen=True)
class SandboxLimits:
    timeout_s: float = 5.0  # wall clock; the pid namespace is killed when it runs out
    memory_mb: int = 512  # address space of the Python process
    workdir_mb: int = 16  # tmpfs size of the work dir (all the code can write)
    max_processes: int = 16
    max_output_chars: int = 2000  # of stdout+stderr kept for the model

    def __post_init__(self) -> None:
        if not self.timeout_s > 0:
            raise ValueError(f"sandbox timeout_s must be > 0, got {self.timeout_s}")
        for name in ("memory_mb", "workdir_mb", "max_processes", "max_output_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"sandbox {name} must be a positive integer, got {value!r}")
        if self.memory_mb < 64:
            raise ValueError(f"sandbox memory_mb must be >= 64 (Python itself needs that), got {self.memory_mb}")


@dataclass(frozen=True)
class SandboxResult:
    output: str  # stdout and stderr, interleaved, cut to max_output_chars
    exit_code: int  # negative: killed by that signal
    timed_out: bool
    elapsed_s: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


def _unshare_prefix(as_root: bool) -> list[str]:
    unshare = shutil.which("unshare")
    if unshare is None:
        raise SandboxUnavailable("the Python tool sandbox needs `unshare` (util-linux); install util-linux")
    if shutil.which("setpriv") is None:
        raise SandboxUnavailable("the Python tool sandbox needs `setpriv` (util-linux) to drop privileges; install util-linux")
    prefix = [unshare, "--net", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc"]
    return prefix if as_root else prefix[:1] + ["--map-root-user"] + prefix[1:]


def _world_executable(path: str) -> bool:
    """Whether any user may run ``path``: every directory above it searchable, the file readable and executable."""
    real = Path(os.path.realpath(path))
    if not real.is_file() or (real.stat().st_mode & 0o005) != 0o005:
        return False
    return all(parent.stat().st_mode & 0o001 for parent in real.parents)


@lru_cache(maxsize=1)
def sandbox_python() -> str:
    """The interpreter for the model's code: roll's own when the sandbox user may run it, else the
    system's python3 (the tool needs only the standard library)."""
    for candidate in (sys.executable, shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")):
        if candidate and (os.geteuid() != 0 or _world_executable(candidate)):
            return candidate
    raise SandboxUnavailable(
        f"no Python that the unprivileged sandbox user can run: {sys.executable} sits in a directory other users "
        "cannot enter; install a system python3 (/usr/bin/python3) or make the interpreter world-executable"
    )


@lru_cache(maxsize=1)
def sandbox_prefix() -> tuple[str, ...]:
    """The unshare command line that works here (probed once per process)."""
    errors = []
    for as_root in ((True, False) if os.geteuid() == 0 else (False,)):
        prefix = _unshare_prefix(as_root)
        probe = subprocess.run(prefix + ["true"], capture_output=True, text=True, timeout=30)
        if probe.returncode == 0:
            return tuple(prefix)
        errors.append(f"{' '.join(prefix)}: {probe.stderr.strip()}")
    raise SandboxUnavailable(
        "cannot create the namespaces the Python tool sandbox needs (run as root, or allow unprivileged "
        "user namespaces: sysctl kernel.unprivileged_userns_clone=1). Tried: " + "; ".join(errors)
    )


def sandbox_unavailable_reason() -> str | None:
    """Why the sandbox cannot run on this machine, or None when it can."""
    try:
        sandbox_prefix(), sandbox_python()
    except SandboxUnavailable as exc:
        return str(exc)
    return None


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n... [output cut at {limit} characters]"


def _stage(host_dir: str, code: str, files: dict[str, str] | None) -> Path:
    os.chmod(host_dir, 0o711)  # the unprivileged sandbox user may pass through to its work dir, not list it
    staging = Path(host_dir) / "staging"
    staging.mkdir()
    for name, text in {**(files or {}), "main.py": code}.items():
        if "/" in name or name.startswith("."):
            raise ValueError(f"sandbox file names must be plain names, got {name!r}")
        (staging / name).write_text(text, encoding="utf-8", errors="replace")
    return staging


def _command(staging: Path, python: str, limits: SandboxLimits, user: str) -> list[str]:
    return list(sandbox_prefix()) + [
        sys.executable, "-I", str(_LAUNCHER), str(staging), python, shutil.which("setpriv"), str(limits.memory_mb),
        str(limits.workdir_mb), str(max(1, int(limits.timeout_s) + 1)), str(limits.max_processes),
        str(OUTPUT_FILE_LIMIT_BYTES), user,
    ]


def run_python(code: str, limits: SandboxLimits = SandboxLimits(), files: dict[str, str] | None = None,
               stdin_text: str = "") -> SandboxResult:
    """Run ``code`` in a fresh sandbox whose work dir (its cwd) holds ``files`` (name -> text), reading
    ``stdin_text`` on its standard input (a code task's test input)."""
    with tempfile.TemporaryDirectory(prefix="roll-sandbox-") as host_dir:
        staging = _stage(host_dir, code, files)
        output_path = Path(host_dir) / "output"
        command = _command(staging, sandbox_python(), limits, "nobody")
        stdin_path = Path(host_dir) / "stdin"
        stdin_path.write_text(stdin_text, encoding="utf-8", errors="replace")
        start = time.monotonic()
        with open(output_path, "wb") as output, open(stdin_path, "rb") as stdin:
            process = subprocess.Popen(command, stdin=stdin, stdout=output, stderr=subprocess.STDOUT,
                                       start_new_session=True, env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
            timed_out = False
            try:
                exit_code = process.wait(timeout=limits.timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                # unshare's --kill-child takes the namespace's init, and with it every process inside
                os.killpg(process.pid, signal.SIGKILL)
                exit_code = process.wait()
        elapsed = time.monotonic() - start
        with open(output_path, "rb") as output:
            raw = output.read(limits.max_output_chars * 4 + 4)
    text = _clip(raw.decode("utf-8", errors="replace"), limits.max_output_chars)
    if timed_out:
        text += f"\nTimeoutError: the code ran longer than {limits.timeout_s:g}s and was stopped"
    return SandboxResult(output=text, exit_code=exit_code, timed_out=timed_out, elapsed_s=elapsed)


class SandboxedServer:
    """roll's own Python code (an env server) running in the sandbox's namespaces and limits: no network,
    a read-only file system, rlimits (``limits.timeout_s`` is its CPU-seconds budget). It runs roll's
    interpreter under roll's uid (it imports roll), without any capability. Its stdin and stdout are
    one end of a Unix socket pair; ``connection`` is the other end. Its stderr is kept (``log_tail``)."""

    def __init__(self, code: str, limits: SandboxLimits) -> None:
        self._host_dir = tempfile.TemporaryDirectory(prefix="roll-server-")
        staging = _stage(self._host_dir.name, code, None)
        self.log_path = Path(self._host_dir.name) / "server.log"
        self.connection, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with open(self.log_path, "ab") as log:
                self.process = subprocess.Popen(
                    _command(staging, sys.executable, limits, "keep"), stdin=theirs, stdout=theirs, stderr=log,
                    start_new_session=True, env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
        finally:
            theirs.close()

    def log_tail(self, chars: int = 2000) -> str:
        text = self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""
        return text[-chars:] or "(empty)"

    def stop(self) -> None:
        """Ends the process tree (unshare's --kill-child takes everything in its pid namespace)."""
        self.connection.close()
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self._host_dir.cleanup()
