"""A live terminal view of servers' tables: ``resound-server stats ADDRESS``
(``resound top ADDRESS`` is the same).

For each server and each of its tables it draws the fill (size over
max_size, as a bar), the bytes the items hold, the insert and sample rates
over the last refresh, the calls waiting for the rate limiter now, and a
histogram of the items' priorities (counted by the server: only the counts
travel), redrawn every ``--every`` seconds until Ctrl-C. When stdout is not
a terminal, or with ``--once``, it prints one plain frame (no escape codes)
and exits; a single reading has no rates yet ("-").

Each ADDRESS is whatever ``resound.Client`` accepts: ``host:port``, or a
target naming several servers (``h1:p1,h2:p2``, ``ipv4:...``,
``dns:///name:port``); every server gets a section of its own.

Reading (``read``) is apart from drawing (``render``), so a frame is a
string made from two readings. Example:

    >>> import resound
    >>> server = resound.Server([resound.Table.queue('q', 10)])
    >>> client = resound.Client(f'localhost:{server.port}')
    >>> before = read(client, bins=4, timeout=5)
    >>> client.insert([1], priorities={'q': 1.0})
    >>> after = read(client, bins=4, timeout=5)
    >>> frame = render(before, after, width=60)
    >>> 'q' in frame and '1 / 10' in frame
    True
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import math
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TextIO

from resound.client import Client
from resound.errors import CancelledError
from resound.priority_histogram import MAX_BINS, PriorityHistogram

if TYPE_CHECKING:
    from resound.table_info import TableInfo

__all__ = ["Reading", "main", "read", "render"]

_BAR_WIDTH = 30
# Eighths of a character cell, for bars that grow smoothly.
_EIGHTHS = " ▏▎▍▌▋▊▉█"
# A histogram bin as one character, by height (empty bins stay blank).
_LEVELS = "▁▂▃▄▅▆▇█"
_HIDE_CURSOR, _SHOW_CURSOR, _HOME_AND_CLEAR = "\x1b[?25l", "\x1b[?25h", "\x1b[H\x1b[J"


@dataclasses.dataclass(frozen=True)
class Reading:
    """What one look at the servers found: each server's tables with their
    priority histograms, by address; when it was taken
    (``time.monotonic()``); the error of a look that failed."""

    taken_at: float
    servers: dict[str, dict[str, tuple[TableInfo, PriorityHistogram]]]
    error: str | None = None


def read(
    client: Client, bins: int, timeout: float | None, clock: Callable[[], float] = time.monotonic
) -> Reading:
    """One reading of every server of ``client``: its tables' infos and
    histograms of ``bins`` bins (one ServerInfo call per table for the
    histograms). Raises what the client raises (a server not reachable
    within ``timeout``: DeadlineExceededError naming it)."""
    infos = client.server_infos(timeout)
    taken_at = clock()
    servers: dict[str, dict[str, tuple[TableInfo, PriorityHistogram]]] = {
        address: {} for address in infos
    }
    names = sorted({name for tables in infos.values() for name in tables})
    for name in names:
        histograms = client.priority_histograms(name, bins, timeout)
        for address, tables in infos.items():
            if name in tables:
                histogram = histograms.get(address, PriorityHistogram(()))
                servers[address][name] = (tables[name], histogram)
    return Reading(taken_at, servers)


def _rate(now: int, before: int | None, seconds: float) -> float | None:
    """Per second, or None without an earlier count."""
    if before is None or seconds <= 0:
        return None
    return (now - before) / seconds


def _bar(fraction: float, width: int) -> str:
    fraction = min(max(fraction, 0.0), 1.0)
    eighths = round(fraction * width * 8)
    full, part = divmod(eighths, 8)
    bar = "█" * full + (_EIGHTHS[part] if part else "")
    return bar + "·" * (width - len(bar))


def _bytes(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _per_second(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:,.1f}/s"


def sparkline(histogram: PriorityHistogram) -> str:
    """The histogram as one character per bin, its height the bin's count
    relative to the largest (a blank for an empty bin).

    Example:
        >>> sparkline(PriorityHistogram((1, 0, 4, 8), 0.0, 1.0))
        '▁ ▄█'
    """
    peak = max(histogram.counts, default=0)
    return "".join(
        " " if count == 0 else _LEVELS[max(0, math.ceil(count / peak * len(_LEVELS)) - 1)]
        for count in histogram.counts
    )


def _priorities(histogram: PriorityHistogram) -> str:
    if not histogram.counts:
        return "(no items)"
    if len(histogram.counts) == 1:
        return f"all {histogram.num_items:,} at {histogram.min_priority:.4g}"
    return (
        f"{histogram.min_priority:.4g} |{sparkline(histogram)}| {histogram.max_priority:.4g}"
        f"  (peak bin {max(histogram.counts):,})"
    )


def _table_lines(
    name: str,
    info: TableInfo,
    histogram: PriorityHistogram,
    previous: tuple[TableInfo, PriorityHistogram] | None,
    seconds: float,
    width: int,
) -> list[str]:
    limiter = info.rate_limiter_info
    earlier = previous[0].rate_limiter_info if previous is not None else None
    if earlier is not None and any(
        getattr(limiter, field).completed < getattr(earlier, field).completed
        for field in ("insert_stats", "sample_stats", "delete_stats")
    ):
        earlier = None  # reset in between: its counters started again from 0
    inserts = _rate(
        limiter.insert_stats.completed,
        None if earlier is None else earlier.insert_stats.completed,
        seconds,
    )
    samples = _rate(
        limiter.sample_stats.completed,
        None if earlier is None else earlier.sample_stats.completed,
        seconds,
    )
    bar_width = max(10, min(_BAR_WIDTH, width - 40))
    fill = info.current_size / info.max_size if info.max_size else 0.0
    memory = _bytes(info.memory_bytes)
    if info.max_bytes:
        memory += f" of {_bytes(info.max_bytes)} ({info.memory_bytes / info.max_bytes:.0%})"
    return [
        f"  table {name!r}",
        f"    fill      {_bar(fill, bar_width)} {fill:6.1%}  "
        f"{info.current_size:,} / {info.max_size:,} items",
        f"    bytes     {memory}",
        f"    rates     inserts {_per_second(inserts)}  samples {_per_second(samples)}",
        f"    limiter   waiting now: {limiter.insert_stats.pending} insert(s), "
        f"{limiter.sample_stats.pending} sample(s); done: "
        f"{limiter.insert_stats.completed:,} inserts, {limiter.sample_stats.completed:,} samples",
        f"    priority  {_priorities(histogram)}",
    ]


def render(previous: Reading | None, current: Reading, width: int = 80) -> str:
    """The frame of ``current`` as plain text (no escape codes), with rates
    over the time since ``previous`` (None: rates shown as "-").

    Example:
        >>> print(render(None, Reading(0.0, {'x:1': {}}, error='ServerInfo: no answer')))
        server x:1: not answering now (ServerInfo: no answer)
    """
    if current.error is not None:
        return f"server {', '.join(current.servers)}: not answering now ({current.error})"
    seconds = 0.0 if previous is None else current.taken_at - previous.taken_at
    lines = []
    for address, tables in current.servers.items():
        lines.append(f"server {address}  ({len(tables)} table{'s' if len(tables) != 1 else ''})")
        before = {} if previous is None else previous.servers.get(address, {})
        for name, (info, histogram) in tables.items():
            lines += _table_lines(name, info, histogram, before.get(name), seconds, width)
    return "\n".join(lines)


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Draw the tables of running resound servers (fill, bytes, insert and "
        "sample rates, rate limiter waits, priority histogram), refreshing until Ctrl-C. "
        "When stdout is not a terminal, or with --once, print one plain frame and exit.",
        epilog=f"Example: {prog} localhost:8000 --every 2",
    )
    parser.add_argument(
        "addresses",
        metavar="ADDRESS",
        nargs="+",
        help="a server's host:port, or any target resound.Client accepts (h1:p1,h2:p2, "
        "ipv4:..., dns:///name:port); each server gets a section",
    )
    parser.add_argument(
        "--every", type=float, default=1.0, metavar="SECONDS", help="refresh period (default 1)"
    )
    parser.add_argument("--once", action="store_true", help="print one plain frame and exit")
    parser.add_argument(
        "--bins",
        type=int,
        default=40,
        help=f"priority histogram bins, 1 to {MAX_BINS} (default 40)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="how long to wait for a server to answer (default 5)",
    )
    return parser


def main(
    argv: Sequence[str] | None = None,
    prog: str = "resound-server stats",
    out: TextIO | None = None,
) -> int:
    """Runs the view (see the module doc); returns the exit status: 0, 1
    when a server does not answer the first reading (argparse exits with 2
    for bad arguments)."""
    parser = _parser(prog)
    args = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    if not (args.every > 0 and math.isfinite(args.every)):
        parser.error(f"--every must be a finite number of seconds > 0, got {args.every}")
    if not 1 <= args.bins <= MAX_BINS:
        parser.error(f"--bins must be an integer in [1, {MAX_BINS}], got {args.bins}")
    if not (args.timeout > 0 and math.isfinite(args.timeout)):
        parser.error(f"--timeout must be a finite number of seconds > 0, got {args.timeout}")
    out = sys.stdout if out is None else out
    clients = []
    for address in args.addresses:
        try:
            # Always over gRPC, as from another process: what the server
            # serves, even when it runs in this one.
            clients.append((address, Client(address, transport="grpc")))
        except (TypeError, ValueError) as error:
            parser.error(f"ADDRESS {address!r}: {error}")
    try:
        return _run(clients, args, out, prog)
    finally:
        for _, client in clients:
            client.close()


def _read_all(clients: list[tuple[str, Client]], args: argparse.Namespace) -> list[Reading]:
    readings = []
    for address, client in clients:
        try:
            readings.append(read(client, args.bins, args.timeout))
        except (ConnectionError, TimeoutError, CancelledError) as error:
            readings.append(Reading(time.monotonic(), {address: {}}, error=str(error)))
    return readings


def _frame(previous: list[Reading] | None, current: list[Reading], width: int) -> str:
    """Each target's section, with rates against ``previous`` (the last
    readings, in the same order) if there are any."""
    earlier: list[Reading | None] = (
        list(previous) if previous is not None else [None] * len(current)
    )
    parts = [render(before, now, width) for before, now in zip(earlier, current, strict=True)]
    return "\n\n".join(parts) + "\n"


def _run(
    clients: list[tuple[str, Client]], args: argparse.Namespace, out: TextIO, prog: str
) -> int:
    current = _read_all(clients, args)
    failed = [r.error for r in current if r.error is not None]
    if failed:
        # The client's errors name the address and what was not reachable.
        for error in failed:
            print(f"{prog}: {error}", file=sys.stderr)
        return 1
    width = shutil.get_terminal_size().columns
    if args.once or not out.isatty():
        out.write(_frame(None, current, width))
        return 0
    previous = None
    out.write(_HIDE_CURSOR)
    try:
        while True:
            stamp = datetime.datetime.now().strftime("%H:%M:%S")
            header = f"resound stats  {stamp}  every {args.every:g} s  (Ctrl-C to quit)\n\n"
            out.write(_HOME_AND_CLEAR + header + _frame(previous, current, width))
            out.flush()
            time.sleep(args.every)
            previous, current = current, _read_all(clients, args)
            width = shutil.get_terminal_size().columns
    except KeyboardInterrupt:
        return 0
    finally:
        out.write(_SHOW_CURSOR)
        out.flush()
