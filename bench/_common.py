"""Helpers shared by the benchmarks: timing with repeats, other processes'
CPU time, table printing, and whether dm-reverb is here to compare with."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable


def median_rate(run: Callable[[], int], repeats: int = 3) -> float:
    """Runs `run` (which returns units of work done) `repeats` times; median units/s."""
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        units = run()
        rates.append(units / (time.perf_counter() - start))
    return statistics.median(rates)


def median_of(measure: Callable[[], float], repeats: int = 3) -> float:
    """Median of `repeats` calls of `measure`, which times itself and returns a rate."""
    return statistics.median(measure() for _ in range(repeats))


def print_table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    print(f"\n{title}")
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        print("| " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) + " |")


def fmt_rate(rate: float) -> str:
    if rate >= 1e6:
        return f"{rate / 1e6:.2f}M/s"
    if rate >= 1e3:
        return f"{rate / 1e3:.1f}k/s"
    return f"{rate:.0f}/s"


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def reverb_here(skip: bool, present: str, absent: str) -> bool:
    """Whether dm-reverb imports in this interpreter (False, without trying,
    if ``skip``: --no-reverb); prints ``present`` or ``absent`` (the
    import's error is appended to it) to say what the run compares with."""
    if skip:
        return False
    try:
        __import__("reverb")
    except ImportError as error:
        print(f"{absent} ({error})")
        return False
    print(present)
    return True
