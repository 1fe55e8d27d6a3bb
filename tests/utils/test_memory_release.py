"""release_free_memory gives a fragmented heap's free pages back: measured in a fresh process, with
the switch on (the default) and off (ROLL_MALLOC_TRIM=0, what benchmarks/soak.py --no-trim compares)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT

PROBE = """
from roll.utils.memory import release_free_memory, resident_bytes
blocks = [bytearray(2000) for _ in range(150_000)]  # 300 MB of small blocks: glibc's heap, not mmap
keep = blocks[::50]  # every 50th stays alive, so the freed pages are not at the top of the heap
del blocks
before = resident_bytes()
released = release_free_memory()
after = resident_bytes()
print(before, after, int(released), len(keep))
"""


@pytest.mark.parametrize("trim", ["1", "0"])
def test_freed_heap_memory_goes_back_to_the_system_unless_switched_off(trim):
    env = {**os.environ, "ROLL_MALLOC_TRIM": trim}
    result = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    before, after, released, _ = map(int, result.stdout.split())
    if trim == "1":
        assert released == 1 and before - after > 200 * 2**20, (before, after)  # most of the 294 MB freed
    else:
        assert released == 0 and before - after < 20 * 2**20, (before, after)
