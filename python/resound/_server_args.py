"""The command line of ``resound-server``: its options and ``--help``, and
those of ``resound-server inspect``.

Example:
    >>> args = command_parser().parse_args(['--config', 'server.toml', '--max-bytes', '8G'])
    >>> args.config, args.max_bytes, args.metrics_port
    ('server.toml', 8589934592, None)
"""

from __future__ import annotations

import argparse

from resound import __version__
from resound._server_config import EXAMPLE_CONFIG

__all__ = ["LOG_LEVELS", "byte_count", "command_parser", "inspect_parser"]

LOG_LEVELS = ("debug", "info", "warning", "error")


def command_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="resound-server",
        description="Serve resound replay tables over gRPC until SIGINT or SIGTERM. "
        "'resound-server inspect CHECKPOINT' prints what a checkpoint holds.",
        epilog="'resound-server stats ADDRESS' draws a running server's tables live "
        "(see its --help).\n\nExample config (TOML):\n\n" + EXAMPLE_CONFIG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"resound-server {__version__}")
    parser.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default="info",
        help="the least severe log lines shown (default: info); debug also shows gRPC's own",
    )
    parser.add_argument(
        "--stats-every",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="log a line per table (size, MiB, inserts/s, samples/s) every SECONDS "
        "(default: 60; 0: never)",
    )
    parser.add_argument(
        "--config", required=True, metavar="FILE", help="TOML file with [server] and [[tables]]"
    )
    parser.add_argument(
        "--host",
        help="interface to serve on (default: the config's, else 127.0.0.1; 0.0.0.0 serves all)",
    )
    parser.add_argument(
        "--port", type=int, help="port to serve on (default: the config's, else a free one)"
    )
    parser.add_argument(
        "--checkpoint-dir",
        metavar="DIR",
        help="restore the newest checkpoint in DIR at start, and write checkpoints there "
        "(client.checkpoint(), --checkpoint-every, --checkpoint-on-stop)",
    )
    parser.add_argument(
        "--checkpoint-every",
        type=float,
        metavar="SECONDS",
        help="write a checkpoint every SECONDS (> 0; needs --checkpoint-dir)",
    )
    parser.add_argument(
        "--checkpoint-on-stop",
        action="store_true",
        help="write a last checkpoint on SIGINT/SIGTERM before stopping (needs --checkpoint-dir)",
    )
    parser.add_argument(
        "--keep-checkpoints",
        type=int,
        default=2,
        metavar="N",
        help="keep the newest N checkpoints in DIR, deleting older ones it wrote (default 2); "
        "files it did not write are never touched",
    )
    parser.add_argument(
        "--max-bytes",
        type=byte_count,
        metavar="N",
        help="refuse inserts that would take the server past N bytes of chunks "
        "(suffixes K, M, G: powers of 1024; default: no limit)",
    )
    parser.add_argument(
        "--max-message-bytes",
        type=byte_count,
        metavar="N",
        help="refuse request messages larger than N bytes before reading them "
        "(suffixes K, M, G; default 1G)",
    )
    parser.add_argument(
        "--max-open-calls",
        type=int,
        metavar="N",
        help="refuse insert streams and sample calls past N open at once "
        "(default 65536; each costs about 25 KB, no thread)",
    )
    parser.add_argument(
        "--max-open-calls-per-connection",
        type=int,
        metavar="N",
        help="the same for one client connection (default 8192)",
    )
    parser.add_argument(
        "--max-inflight-bytes",
        type=byte_count,
        metavar="N",
        help="refuse sample responses past N bytes held for clients that have not read "
        "them yet (suffixes K, M, G; default 2G)",
    )
    parser.add_argument(
        "--max-inflight-bytes-per-connection",
        type=byte_count,
        metavar="N",
        help="the same for one client connection (default 512M)",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve Prometheus metrics on http://HOST:PORT/metrics (0: a free port; "
        "default: the config's, else none); needs pip install 'resound-rl[metrics]'",
    )
    parser.add_argument(
        "--no-local-transport",
        dest="local_transport",
        action="store_false",
        default=None,
        help="serve gRPC only: no same-host transport (a Unix socket and shared memory that "
        "clients on this host use by themselves; docs/local-transport.md)",
    )
    parser.add_argument(
        "--tls-cert", metavar="FILE", help="serve TLS only, with this certificate chain (PEM)"
    )
    parser.add_argument("--tls-key", metavar="FILE", help="the TLS certificate's key (PEM)")
    parser.add_argument(
        "--tls-client-ca",
        metavar="FILE",
        help="require client certificates signed by this CA (PEM; needs --tls-cert)",
    )
    return parser


def inspect_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="resound-server inspect",
        description="Check a checkpoint and print what it holds.",
    )
    parser.add_argument(
        "path",
        metavar="CHECKPOINT",
        help="a checkpoint directory (as client.checkpoint() returns), or its .rsnd file",
    )
    return parser


def byte_count(text: str) -> int:
    """``--max-bytes``: an integer, optionally with K, M or G (powers of 1024)."""
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    digits = text[:-1] if scale > 1 else text
    if not digits.isdigit() or int(digits) < 1:
        raise argparse.ArgumentTypeError(
            f"must be a positive integer of bytes, optionally with K, M or G, got {text!r}"
        )
    return int(digits) * scale
