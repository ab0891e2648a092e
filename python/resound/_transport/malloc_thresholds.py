"""glibc malloc's thresholds for processes that move multi-megabyte gRPC
messages: a listening server (its sample responses) and a remote client (the
responses it receives, the insert requests it sends).

Each such message is a fresh buffer, copied again by gRPC. With glibc's
default thresholds each buffer was mapped, page-faulted in and handed back to
the kernel: on the server that took half its CPU time per sample (20 -> 6 us
for 4 KB samples, measured with perf), on the client about a tenth. Raising
M_MMAP_THRESHOLD to 32 MB and M_TRIM_THRESHOLD to 64 MB makes those buffers
reuse warm heap pages; the process keeps up to 64 MB of freed memory per heap
arena in exchange. ``RESOUND_KEEP_MALLOC_DEFAULTS=1`` leaves malloc alone.
"""

from __future__ import annotations

import os
import threading

__all__ = ["KEEP_MALLOC_DEFAULTS_VARIABLE", "keep_message_buffers_warm"]

KEEP_MALLOC_DEFAULTS_VARIABLE = "RESOUND_KEEP_MALLOC_DEFAULTS"
_MMAP_THRESHOLD_BYTES = 32 << 20  # the most older glibc takes on 64-bit hosts
_TRIM_THRESHOLD_BYTES = 64 << 20

_lock = threading.Lock()
_done = False


def keep_message_buffers_warm() -> None:
    """Sets the thresholds once per process (nothing off glibc, or when
    RESOUND_KEEP_MALLOC_DEFAULTS is set to anything but 0)."""
    global _done
    with _lock:
        if _done:
            return
        _done = True
    if os.environ.get(KEEP_MALLOC_DEFAULTS_VARIABLE, "") not in ("", "0"):
        return
    from resound import _core

    _core.keep_large_allocations_warm(_MMAP_THRESHOLD_BYTES, _TRIM_THRESHOLD_BYTES)
