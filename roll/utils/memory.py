"""A process's resident memory, and giving freed heap memory back to the system.

glibc keeps memory that Python and PyTorch free on CPU (small and medium blocks of its heaps) for
reuse instead of returning it, so a long-lived worker's resident size climbs towards its largest step
and stays there, while the other roles on the machine would need it. `release_free_memory()` calls
glibc's `malloc_trim(0)`, which returns every whole free page of the heaps; the Cluster's worker
hosts call it after each heavy step method (roll/distributed/cluster.py). It costs a few ms.
`ROLL_MALLOC_TRIM=0` in a worker's environment (`system_envs`) turns it off, to measure what it saves.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

_PAGE = os.sysconf("SC_PAGE_SIZE")
_libc = None


def resident_bytes(pid: int | None = None) -> int:
    """Resident set size of `pid` (this process when None), from /proc/<pid>/statm."""
    with open(f"/proc/{pid or 'self'}/statm") as f:
        return int(f.read().split()[1]) * _PAGE


def release_free_memory() -> bool:
    """Returns freed heap pages to the system (glibc malloc_trim); False where there is no glibc
    (musl, macOS), where nothing can be done this way, or when ROLL_MALLOC_TRIM=0."""
    global _libc
    if os.environ.get("ROLL_MALLOC_TRIM", "1") == "0":
        return False
    if _libc is None:
        name = ctypes.util.find_library("c")
        try:
            _libc = ctypes.CDLL(name) if name else False
        except OSError:
            _libc = False
    if not _libc or not hasattr(_libc, "malloc_trim"):
        return False
    _libc.malloc_trim(0)
    return True
