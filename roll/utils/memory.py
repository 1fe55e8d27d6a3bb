"""A process's resident memory, and giving freed heap memory back to the system.

glibc keeps memory that Python and PyTorch free on CPU (small and medium blocks of its heaps) for
reuse instead of returning it, so a long-lived worker's resident size climbs towards its largest step
and stays there, while the other roles on the machine would need it. `release_free_memory()` calls
glibc's `malloc_trim(0)`, which returns every whole free page of the heaps; the Cluster's worker
hosts call it after each heavy step method (roll/distributed/cluster.py). It costs a few ms.
`ROLL_MALLOC_TRIM=0` in a worker's environment (`system_envs`) turns it off, to measure what it saves.

Trimming between steps does not lower the peak inside a step. glibc serves a block from its own map
only above a threshold that starts at 128 KiB and rises to the largest block freed so far (up to
32 MB); after the first step nearly every activation of a training step comes from the heap, where
blocks of changing sizes fragment it. `map_large_blocks()` fixes the threshold instead (ROLL's
training workers call it when they start): on the CPU example's training worker
(benchmarks/train_worker_memory.py) a step's peak fell from 4,273 MB to 2,954 MB with a 64 KiB
threshold, for 28% more time per update on this CPU (fresh pages must be faulted in; see
docs/pipeline.md). `ROLL_MMAP_THRESHOLD=0` keeps glibc's own behaviour.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

_PAGE = os.sysconf("SC_PAGE_SIZE")
_libc = None
M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number
DEFAULT_MMAP_THRESHOLD = 64 << 10


def resident_bytes(pid: int | None = None) -> int:
    """Resident set size of `pid` (this process when None), from /proc/<pid>/statm."""
    with open(f"/proc/{pid or 'self'}/statm") as f:
        return int(f.read().split()[1]) * _PAGE


def _glibc_function(name: str):
    """A function of the C library, or None where there is none by that name (musl, macOS)."""
    global _libc
    if _libc is None:
        path = ctypes.util.find_library("c")
        try:
            _libc = ctypes.CDLL(path) if path else False
        except OSError:
            _libc = False
    return getattr(_libc, name, None) if _libc else None


def release_free_memory() -> bool:
    """Returns freed heap pages to the system (glibc malloc_trim); False where there is no glibc
    (musl, macOS), where nothing can be done this way, or when ROLL_MALLOC_TRIM=0."""
    if os.environ.get("ROLL_MALLOC_TRIM", "1") == "0":
        return False
    trim = _glibc_function("malloc_trim")
    if trim is None:
        return False
    trim(0)
    return True


def map_large_blocks() -> int:
    """From now on, blocks of at least ROLL_MMAP_THRESHOLD bytes (default 64 KiB) get their own memory
    map, given back to the system as soon as they are freed (glibc mallopt M_MMAP_THRESHOLD, which
    also stops glibc raising the threshold). Returns the threshold set; 0 when ROLL_MMAP_THRESHOLD=0
    or there is no glibc."""
    value = os.environ.get("ROLL_MMAP_THRESHOLD", str(DEFAULT_MMAP_THRESHOLD))
    try:
        threshold = int(value)
    except ValueError:
        raise ValueError(f"ROLL_MMAP_THRESHOLD must be a whole number of bytes (0 keeps glibc's own "
                         f"threshold), got {value!r}") from None
    mallopt = _glibc_function("mallopt") if threshold > 0 else None
    if mallopt is None or mallopt(M_MMAP_THRESHOLD, threshold) != 1:
        return 0
    return threshold
