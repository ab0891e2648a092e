"""``resound-server``: serves tables described in a TOML file over gRPC.

Usage::

    resound-server --config server.toml [--host H] [--port P] [--metrics-port M]
                   [--checkpoint-dir DIR [--checkpoint-every SECONDS]
                    [--checkpoint-on-stop] [--keep-checkpoints N]]
    resound-server inspect CHECKPOINT

It checks the whole config before it starts anything, restores the newest
checkpoint in ``--checkpoint-dir`` if there is one, logs its tables and
address, serves until SIGINT or SIGTERM, then stops cleanly (blocked clients
get an error, not a hang). With ``--checkpoint-every`` it writes checkpoints
periodically, with ``--checkpoint-on-stop`` a last one before stopping; with
``--metrics-port`` it serves Prometheus metrics on ``/metrics``.
``inspect`` prints what a checkpoint (a directory ``client.checkpoint()``
returned, or its file) holds. See ``EXAMPLE_CONFIG``
(also in ``--help``). The options are in resound._server_args, the config
in resound._server_config.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from resound._server_args import command_parser, inspect_parser
from resound._server_config import (
    EXAMPLE_CONFIG,
    ConfigError,
    ServerSettings,
    load_config,
    server_settings,
    tables_from_config,
)

__all__ = [
    "ConfigError",
    "EXAMPLE_CONFIG",
    "inspect_main",
    "load_config",
    "main",
    "tables_from_config",
]

_log = logging.getLogger("resound.server")


def inspect_main(argv: Sequence[str]) -> int:
    """``resound-server inspect PATH``: 0 and a report, or 2 and why not."""
    args = inspect_parser().parse_args(argv)
    from resound import checkpointers

    try:
        summary = checkpointers.inspect(args.path)
    except (ValueError, OSError) as error:
        print(f"resound-server inspect: {error}", file=sys.stderr)
        return 2
    print(f"checkpoint {args.path}")
    print(
        f"  {summary['file_bytes']:,} bytes; {summary['num_chunks']:,} chunks holding "
        f"{summary['chunk_bytes']:,} bytes of data; {len(summary['tables'])} table(s)"
    )
    for table in summary["tables"]:
        sampler, remover = table["sampler"], table["remover"]
        print(
            f"  table {table['name']!r}: {table['num_items']:,} items; sampler "
            f"{sampler['kind']}, remover {remover['kind']}, max_size {table['max_size']:,}, "
            f"max_times_sampled {table['max_times_sampled']}"
        )
        print(
            f"    {table['rate_limiter']}; inserts {table['insert_count']:,}, samples "
            f"{table['sample_count']:,}, deletes {table['delete_count']:,}"
        )
    for file in summary.get("files", []):
        tables = ", ".join(repr(name) for name in file["tables"])
        print(f"  file {file['name']}: {file['bytes']:,} bytes; table(s) {tables}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command; returns its exit status (0 after a clean stop, 2 for
    a bad config or arguments)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["inspect"]:
        return inspect_main(argv[1:])
    if argv[:1] == ["stats"]:
        from resound import stats_view  # the live view, loaded only for it

        return stats_view.main(argv[1:], prog="resound-server stats")
    args = command_parser().parse_args(argv)
    level = getattr(logging, args.log_level.upper())
    logging.basicConfig(level=level, format="%(asctime)s resound-server %(message)s")
    # gRPC's C++ core writes its own lines to stderr; they reach the terminal
    # only when asked for (or when GRPC_VERBOSITY is set by the user).
    os.environ.setdefault("GRPC_VERBOSITY", "DEBUG" if level <= logging.DEBUG else "NONE")
    try:
        settings = server_settings(args)
    except ConfigError as error:
        print(f"resound-server: {error}", file=sys.stderr)
        return 2
    return _run(args, settings)


def _run(args: argparse.Namespace, settings: ServerSettings) -> int:
    """Starts the server of ``settings``, serves until SIGINT or SIGTERM,
    stops it; 2 if it cannot start."""
    import resound
    from resound import checkpointers

    checkpointer = None
    if args.checkpoint_dir is not None:
        try:
            checkpointer = checkpointers.DefaultCheckpointer(
                args.checkpoint_dir, keep_latest=args.keep_checkpoints
            )
            latest = checkpointer.latest()
            # Made now, so that a folder it cannot write fails here rather
            # than at the first checkpoint, hours later.
            os.makedirs(checkpointer.path, exist_ok=True)
            if not os.access(checkpointer.path, os.W_OK | os.X_OK):
                raise PermissionError(f"cannot write in {checkpointer.path}")
        except (OSError, ValueError) as error:  # not a folder, not readable, ...
            print(
                f"resound-server: --checkpoint-dir {args.checkpoint_dir}: {error}", file=sys.stderr
            )
            return 2
        _log.info(
            "restoring %s" if latest else "no checkpoint in %s: starting empty",
            latest or checkpointer.path,
        )
    # Installed before the server starts: a supervisor that sees the
    # "serving" line and sends SIGTERM at once gets a clean stop.
    stop = threading.Event()

    def request_stop(signum: int, frame: Any) -> None:
        del frame
        _log.info("received %s, stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    try:
        # Restores before it serves: a bad checkpoint stops it here, unserved.
        server = resound.Server(
            settings.tables,
            port=settings.port,
            host=settings.host,
            checkpointer=checkpointer,
            tls=settings.tls,
            metrics_port=settings.metrics_port,
            local_transport=settings.local_transport,
            **settings.limits,
        )
    except (ValueError, RuntimeError, OSError, ImportError) as error:
        print(f"resound-server: {error}", file=sys.stderr)
        return 2

    def checkpoint(why: str) -> None:
        try:
            # Which logs what it wrote, or that nothing changed since the last.
            server.checkpoint(skip_unchanged=True)
        except (ValueError, RuntimeError, OSError) as error:  # logged; serving goes on
            _log.error("checkpoint (%s) failed: %s", why, error)

    def checkpoint_periodically(every: float) -> None:
        while not stop.wait(every):
            checkpoint("periodic")

    if args.stats_every > 0:
        from resound._server_stats import StatsLine

        stats = StatsLine(server)

        def log_stats(every: float) -> None:
            while not stop.wait(every):
                for line in stats.lines():
                    _log.info("%s", line)

        threading.Thread(
            target=log_stats, args=(args.stats_every,), name="resound-stats", daemon=True
        ).start()

    if args.checkpoint_every is not None:
        threading.Thread(
            target=checkpoint_periodically,
            args=(args.checkpoint_every,),
            name="resound-checkpoints",
            daemon=True,
        ).start()

    for table in settings.tables:
        _log.info("table %s", table)
    while not stop.wait(0.5):
        pass
    if args.checkpoint_on_stop:
        checkpoint("on stop")
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
