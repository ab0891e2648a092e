"""A periodic line per table for the server's log: fill, bytes and rates.

``StatsLine`` keeps the counters it saw last, so each line gives the rates
since the one before (``resound-server --stats-every SECONDS``).

Example:
    >>> import resound
    >>> server = resound.Server([resound.Table.queue('q', 10)], listen=False)
    >>> stats = StatsLine(server)
    >>> stats.lines(now=1.0)
    ["table 'q': 0 / 10 items, 0.0 MiB, 0 inserts/s, 0 samples/s"]
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from resound._table_host import TableHost

__all__ = ["StatsLine"]


class StatsLine:
    """Lines for ``server``'s tables; rates are per second since the last call
    (since creation for the first)."""

    def __init__(self, server: TableHost) -> None:
        self._server = server
        self._last: dict[str, tuple[int, int]] = {}
        self._last_time = time.monotonic()
        for name, inserts, samples, _ in self._counters():
            self._last[name] = (inserts, samples)

    def _counters(self) -> list[tuple[str, int, int, Any]]:
        found = []
        for name, table in self._server.tables.items():
            info = table._core.info()
            limiter = info.rate_limiter
            found.append((name, int(limiter["inserts"]), int(limiter["samples"]), info))
        return found

    def lines(self, now: float | None = None) -> list[str]:
        """One line per table, in the server's order."""
        now = time.monotonic() if now is None else now
        elapsed = max(now - self._last_time, 1e-9)
        self._last_time = now
        lines = []
        for name, inserts, samples, info in self._counters():
            last_inserts, last_samples = self._last.get(name, (inserts, samples))
            self._last[name] = (inserts, samples)
            lines.append(
                f"table {name!r}: {info.current_size:,} / {info.max_size:,} items, "
                f"{info.memory_bytes / 2**20:,.1f} MiB, "
                f"{(inserts - last_inserts) / elapsed:,.0f} inserts/s, "
                f"{(samples - last_samples) / elapsed:,.0f} samples/s"
            )
        return lines
