"""A listening server raises glibc malloc's mmap and trim thresholds (its
sample responses are fresh multi-megabyte buffers), unless
RESOUND_KEEP_MALLOC_DEFAULTS says not to."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from resound import _core

# Under tools/sanitize_python.sh the sanitizer's runtime replaces malloc
# (and refuses mallopt): the thresholds are then not glibc's to set.
glibc = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc" or "san.so" in os.environ.get("LD_PRELOAD", ""),
    reason="the thresholds are glibc malloc's",
)

# Reads M_MMAP_THRESHOLD's effect back: a 20 MB block comes from the heap
# (below the threshold) or from a mapping of its own (malloc_usable_size then
# reports the mapping's page-rounded size minus its header).
PROBE = """
import ctypes, os, sys
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc_usable_size.restype = ctypes.c_size_t
libc.malloc_usable_size.argtypes = [ctypes.c_void_p]
import resound
if sys.argv[1] == 'serve':
    resound.Server([resound.Table.queue('q', 1)]).stop()
size = 20 << 20
block = libc.malloc(size)
usable = libc.malloc_usable_size(block)
# A mapped block's usable size is its mapping less a 16-byte header: a page
# multiple minus 16. A heap block's is the request rounded to 16 bytes, plus 8.
print('mapped' if (usable + 16) % 4096 == 0 else 'heap')
"""


def probe(*args: str, env: dict | None = None) -> str:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=env, timeout=60
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.strip()


@glibc
def test_glibc_takes_the_thresholds():
    assert _core.keep_large_allocations_warm(32 << 20, 64 << 20) is True


@pytest.mark.slow
@glibc
def test_a_listening_server_moves_large_blocks_to_the_heap_unless_told_not_to():
    assert probe("idle") == "mapped"  # glibc's default: 20 MB gets a mapping of its own
    assert probe("serve") == "heap"
    keep = {**os.environ, "RESOUND_KEEP_MALLOC_DEFAULTS": "1"}
    assert probe("serve", env=keep) == "mapped"
