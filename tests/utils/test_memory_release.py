"""release_free_memory gives a fragmented heap's free pages back, and map_large_blocks makes large
blocks go back as soon as they are freed: each measured in a fresh process, with the switch on (the
default) and off (ROLL_MALLOC_TRIM=0, what benchmarks/soak.py --no-trim compares; ROLL_MMAP_THRESHOLD=0)."""

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


LARGE_BLOCKS = """
import os, torch
from roll.utils.memory import map_large_blocks
threshold = map_large_blocks()
warm = torch.ones(2 << 20)  # an 8 MB block freed: glibc's own threshold rises to 8 MB
del warm
big, keep = [], []
for _ in range(200):
    big.append(torch.ones(1 << 18))  # 1 MB each, touched
    keep.append(bytearray(3000))  # small live blocks between them, so the heap cannot shrink from its top
def anon():
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("RssAnon")) * 1024
before = anon()
del big
print(threshold, before - anon(), len(keep))
"""


@pytest.mark.parametrize("setting", ["65536", "0"])
def test_large_blocks_go_back_to_the_system_when_freed_unless_switched_off(setting):
    env = {**os.environ, "ROLL_MMAP_THRESHOLD": setting, "ROLL_MALLOC_TRIM": "0"}
    result = subprocess.run([sys.executable, "-c", LARGE_BLOCKS], cwd=REPO_ROOT, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    threshold, freed, _ = map(int, result.stdout.split())
    if setting == "65536":
        assert threshold == 65536 and freed > 180 * 2**20, freed  # the 200 MB went back at once
    else:  # glibc's default: the blocks came from the heap and stay resident until a malloc_trim
        assert threshold == 0 and freed < 20 * 2**20, freed


def test_a_threshold_that_is_not_a_number_names_the_variable(monkeypatch):
    from roll.utils.memory import map_large_blocks

    monkeypatch.setenv("ROLL_MMAP_THRESHOLD", "64k")
    with pytest.raises(ValueError, match="ROLL_MMAP_THRESHOLD must be a whole number of bytes .* got '64k'"):
        map_large_blocks()
