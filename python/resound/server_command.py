"""``resound-server``: serves tables described in a TOML file over gRPC.

Usage::

    resound-server --config server.toml [--host H] [--port P]
                   [--checkpoint-dir DIR [--checkpoint-every SECONDS]
                    [--checkpoint-on-stop] [--keep-checkpoints N]]
    resound-server inspect CHECKPOINT

It checks the whole config before it starts anything, restores the newest
checkpoint in ``--checkpoint-dir`` if there is one, logs its tables and
address, serves until SIGINT or SIGTERM, then stops cleanly (blocked clients
get an error, not a hang). With ``--checkpoint-every`` it writes checkpoints
periodically, with ``--checkpoint-on-stop`` a last one before stopping.
``inspect`` prints what a checkpoint (a directory ``client.checkpoint()``
returned, or its file) holds. See ``EXAMPLE_CONFIG``
(also in ``--help``).
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from resound import __version__

__all__ = [
    "ConfigError",
    "EXAMPLE_CONFIG",
    "inspect_main",
    "load_config",
    "main",
    "tables_from_config",
]

_log = logging.getLogger("resound.server")
_LOG_LEVELS = ("debug", "info", "warning", "error")

EXAMPLE_CONFIG = """\
# Where to serve. 127.0.0.1 admits only this machine; "0.0.0.0" (or "::")
# serves every interface: do that on trusted networks only, or with TLS and
# client certificates. --host, --port and --tls-* override these.
[server]
host = "127.0.0.1"
port = 8000
# max_bytes = 8_589_934_592    # refuse inserts past 8 GiB of chunks (default: no limit)
# max_message_bytes = 67_108_864  # refuse request messages over 64 MiB (default 1 GiB)
# max_open_calls = 65_536      # refuse insert streams and sample calls past this many open
# max_open_calls_per_connection = 8_192  # the same for one client connection
# max_inflight_bytes = 2_147_483_648  # refuse sample responses past 2 GiB unread by clients
# max_inflight_bytes_per_connection = 536_870_912  # the same for one client connection
# tls_cert = "server.pem"      # TLS: the server's certificate chain and key (PEM)
# tls_key = "server.key"
# tls_client_ca = "ca.pem"     # and require client certificates signed by this CA

# One [[tables]] block per table.
[[tables]]
name = "replay"
sampler = "prioritized"        # uniform, prioritized, fifo, lifo, min_heap, max_heap
priority_exponent = 0.8        # prioritized only
remover = "fifo"               # the same choices as sampler
max_size = 1_000_000
# max_bytes = 4_294_967_296    # optional: evict also while items hold over 4 GiB of chunks
max_times_sampled = 0          # 0: no limit
signature.observation = { shape = [84, 84, 3], dtype = "uint8" }  # optional: the
signature.action = { shape = [], dtype = "int32" }  # items' structure; -1: any size

[tables.rate_limiter]          # min_size, sample_to_insert_ratio, queue or stack
kind = "sample_to_insert_ratio"
samples_per_insert = 4.0
min_size_to_sample = 1000
error_buffer = 400.0           # or [min_diff, max_diff]

[[tables]]
name = "queue"
kind = "queue"                 # queue or stack: Table.queue / Table.stack
max_size = 10_000
"""

_SELECTORS = ("uniform", "prioritized", "fifo", "lifo", "min_heap", "max_heap")
_LIMITERS = ("min_size", "sample_to_insert_ratio", "queue", "stack")
_TABLE_KINDS = ("table", "queue", "stack")
_TABLE_KEYS = {
    "name",
    "kind",
    "sampler",
    "priority_exponent",
    "remover",
    "max_size",
    "max_bytes",
    "max_times_sampled",
    "rate_limiter",
    "signature",
}


class ConfigError(ValueError):
    """A config the server cannot start from; the message names the key."""


def load_config(path: str) -> dict[str, Any]:
    """The parsed TOML file (ConfigError if it cannot be read or parsed)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    from resound._files import NotARegularFileError, read_regular_file

    try:
        data = read_regular_file(path)  # a FIFO or /dev/zero would hang the start
    except OSError as error:
        raise ConfigError(f"cannot read config {path}: {error.strerror or error}") from None
    except NotARegularFileError as error:
        raise ConfigError(f"cannot read config: {error}") from None
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise ConfigError(f"config {path} is not valid TOML: not UTF-8 text ({error})") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config {path} is not valid TOML: {error}") from None


def tables_from_config(config: dict[str, Any]) -> list[Any]:
    """The resound.Table objects the config describes (ConfigError names the
    first bad key and its allowed values)."""
    import resound  # deferred: --help should not pay for the import

    unknown = set(config) - {"server", "tables"}
    if unknown:
        raise ConfigError(f"unknown top-level key(s) {sorted(unknown)}; allowed: server, tables")
    tables = config.get("tables")
    if not isinstance(tables, list) or not tables:
        raise ConfigError("tables: at least one [[tables]] block is required")
    built = []
    names: set[str] = set()
    for index, table in enumerate(tables):
        where = f"tables[{index}]"
        if not isinstance(table, dict):
            raise ConfigError(f"{where} must be a table ([[tables]] block)")
        name = _get(table, "name", str, where)
        where = f"tables[{index}] ({name!r})"
        if name in names:
            raise ConfigError(f"{where}.name: {name!r} is used by two tables")
        names.add(name)
        unknown = set(table) - _TABLE_KEYS
        if unknown:
            raise ConfigError(
                f"{where}: unknown key(s) {sorted(unknown)}; allowed: {sorted(_TABLE_KEYS)}"
            )
        try:
            built.append(_table(resound, table, name, where))
        except ConfigError:
            raise
        except (ValueError, TypeError) as error:
            raise ConfigError(f"{where}: {error}") from None
    return built


def _table(resound: Any, table: dict[str, Any], name: str, where: str) -> Any:
    kind = table.get("kind", "table")
    _choice(kind, _TABLE_KINDS, f"{where}.kind")
    max_size = _get(table, "max_size", int, where)
    if max_size < 1:
        raise ConfigError(f"{where}.max_size must be >= 1, got {max_size}")
    signature = _signature(resound, table.get("signature"), f"{where}.signature")
    if kind != "table":
        extra = set(table) - {"name", "kind", "max_size", "signature"}
        if extra:
            raise ConfigError(
                f"{where}: a {kind} takes only name, max_size and signature, not {sorted(extra)}"
            )
        make = resound.Table.queue if kind == "queue" else resound.Table.stack
        return make(name, max_size, signature=signature)
    sampler = _selector(resound, table, "sampler", where)
    remover = _selector(resound, table, "remover", where)
    max_times_sampled = table.get("max_times_sampled", 0)
    if not isinstance(max_times_sampled, int) or isinstance(max_times_sampled, bool):
        raise ConfigError(f"{where}.max_times_sampled must be an integer >= 0")
    limiter = _limiter(resound, table.get("rate_limiter"), max_size, f"{where}.rate_limiter")
    max_bytes = _optional_positive(table.get("max_bytes"), f"{where}.max_bytes")
    return resound.Table(
        name,
        sampler,
        remover,
        max_size,
        limiter,
        max_times_sampled=max_times_sampled,
        signature=signature,
        max_bytes=max_bytes,
    )


def _selector(resound: Any, table: dict[str, Any], key: str, where: str) -> Any:
    kind = _get(table, key, str, where)
    _choice(kind, _SELECTORS, f"{where}.{key}")
    selectors = resound.selectors
    if kind == "prioritized":
        exponent = table.get("priority_exponent")
        if not isinstance(exponent, (int, float)) or isinstance(exponent, bool):
            raise ConfigError(
                f"{where}.priority_exponent: a finite number >= 0 is required by a prioritized "
                f"{key} (as for selectors.Prioritized), got {exponent!r}"
            )
        return selectors.Prioritized(float(exponent))
    return {
        "uniform": selectors.Uniform,
        "fifo": selectors.Fifo,
        "lifo": selectors.Lifo,
        "min_heap": selectors.MinHeap,
        "max_heap": selectors.MaxHeap,
    }[kind]()


def _limiter(resound: Any, spec: Any, max_size: int, where: str) -> Any:
    if not isinstance(spec, dict):
        raise ConfigError(
            f'{where} is required: a table such as {{ kind = "min_size", min_size_to_sample = 1 }}'
            f"; kinds: {', '.join(_LIMITERS)}"
        )
    kind = _get(spec, "kind", str, where)
    _choice(kind, _LIMITERS, f"{where}.kind")
    limiters = resound.rate_limiters
    allowed = {
        "min_size": {"kind", "min_size_to_sample"},
        "sample_to_insert_ratio": {
            "kind",
            "samples_per_insert",
            "min_size_to_sample",
            "error_buffer",
        },
        "queue": {"kind", "size"},
        "stack": {"kind", "size"},
    }[kind]
    unknown = set(spec) - allowed
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {sorted(unknown)} for {kind}; allowed: {sorted(allowed)}"
        )
    if kind == "min_size":
        return limiters.MinSize(_get(spec, "min_size_to_sample", int, where))
    if kind == "sample_to_insert_ratio":
        buffer = spec.get("error_buffer")
        if isinstance(buffer, list):
            buffer = tuple(buffer)
        if buffer is None:
            raise ConfigError(
                f"{where}.error_buffer is required (a number or [min_diff, max_diff])"
            )
        return limiters.SampleToInsertRatio(
            _get(spec, "samples_per_insert", (int, float), where),
            _get(spec, "min_size_to_sample", int, where),
            buffer,
        )
    size = spec.get("size", max_size)
    limiter = limiters.Queue if kind == "queue" else limiters.Stack
    return limiter(size)


def _signature(resound: Any, spec: Any, where: str) -> Any:
    if spec is None:
        return None
    if isinstance(spec, dict) and set(spec) <= {"shape", "dtype"} and "dtype" in spec:
        shape = spec.get("shape", [])
        if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) for d in shape
        ):
            raise ConfigError(f"{where}.shape must be a list of integers (-1: unknown size)")
        import numpy as np

        try:
            dtype = np.dtype(spec["dtype"])
        except TypeError:
            raise ConfigError(
                f"{where}.dtype: {spec['dtype']!r} is not a numpy dtype name (e.g. float32, uint8)"
            ) from None
        return resound.TensorSpec([None if d < 0 else d for d in shape], dtype)
    if isinstance(spec, dict):
        return {key: _signature(resound, value, f"{where}.{key}") for key, value in spec.items()}
    if isinstance(spec, list):
        return [_signature(resound, value, f"{where}[{i}]") for i, value in enumerate(spec)]
    raise ConfigError(
        f'{where} must be {{ shape = [...], dtype = "..." }} or a table or list of them'
    )


def _get(table: dict[str, Any], key: str, kind: Any, where: str) -> Any:
    if key not in table:
        raise ConfigError(f"{where}.{key} is required")
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise ConfigError(f"{where}.{key} must be {names}, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{where}.{key} must be finite, got {value!r}")
    return value


def _choice(value: Any, allowed: Sequence[str], where: str) -> None:
    if value not in allowed:
        raise ConfigError(f"{where}: {value!r} is not one of {', '.join(allowed)}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="resound-server",
        description="Serve resound replay tables over gRPC until SIGINT or SIGTERM. "
        "'resound-server inspect CHECKPOINT' prints what a checkpoint holds.",
        epilog="Example config (TOML):\n\n" + EXAMPLE_CONFIG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"resound-server {__version__}")
    parser.add_argument(
        "--log-level",
        choices=_LOG_LEVELS,
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
        type=_byte_count,
        metavar="N",
        help="refuse inserts that would take the server past N bytes of chunks "
        "(suffixes K, M, G: powers of 1024; default: no limit)",
    )
    parser.add_argument(
        "--max-message-bytes",
        type=_byte_count,
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
        type=_byte_count,
        metavar="N",
        help="refuse sample responses past N bytes held for clients that have not read "
        "them yet (suffixes K, M, G; default 2G)",
    )
    parser.add_argument(
        "--max-inflight-bytes-per-connection",
        type=_byte_count,
        metavar="N",
        help="the same for one client connection (default 512M)",
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


def _inspect_parser() -> argparse.ArgumentParser:
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


def inspect_main(argv: Sequence[str]) -> int:
    """``resound-server inspect PATH``: 0 and a report, or 2 and why not."""
    args = _inspect_parser().parse_args(argv)
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
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command; returns its exit status (0 after a clean stop, 2 for
    a bad config or arguments)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["inspect"]:
        return inspect_main(argv[1:])
    args = _parser().parse_args(argv)
    level = getattr(logging, args.log_level.upper())
    logging.basicConfig(level=level, format="%(asctime)s resound-server %(message)s")
    # gRPC's C++ core writes its own lines to stderr; they reach the terminal
    # only when asked for (or when GRPC_VERBOSITY is set by the user).
    os.environ.setdefault("GRPC_VERBOSITY", "DEBUG" if level <= logging.DEBUG else "NONE")
    try:
        if not (math.isfinite(args.stats_every) and args.stats_every >= 0):
            raise ConfigError(
                f"--stats-every must be a number of seconds >= 0 (0: never), got {args.stats_every}"
            )
        if args.checkpoint_dir is None and (
            args.checkpoint_every is not None or args.checkpoint_on_stop
        ):
            raise ConfigError("--checkpoint-every and --checkpoint-on-stop need --checkpoint-dir")
        if args.checkpoint_every is not None and not (
            math.isfinite(args.checkpoint_every) and args.checkpoint_every > 0
        ):
            raise ConfigError(
                f"--checkpoint-every must be a number of seconds > 0, got {args.checkpoint_every}"
            )
        if args.keep_checkpoints < 1:
            raise ConfigError(f"--keep-checkpoints must be >= 1, got {args.keep_checkpoints}")
        config = load_config(args.config)
        server_config = config.get("server", {})
        if not isinstance(server_config, dict):
            raise ConfigError("server must be a table ([server])")
        allowed = (
            "host", "port", "max_bytes", "max_message_bytes", "max_open_calls",
            "max_open_calls_per_connection", "max_inflight_bytes",
            "max_inflight_bytes_per_connection", "tls_cert", "tls_key", "tls_client_ca",
        )  # fmt: skip
        unknown = set(server_config) - set(allowed)
        if unknown:
            raise ConfigError(
                f"server: unknown key(s) {sorted(unknown)}; allowed: {', '.join(allowed)}"
            )
        host = args.host or server_config.get("host", "127.0.0.1")
        port = args.port if args.port is not None else server_config.get("port")
        if not isinstance(host, str) or not host:
            raise ConfigError(f"server.host must be a nonempty string, got {host!r}")
        if port is not None and (
            not isinstance(port, int) or isinstance(port, bool) or not 0 <= port < 65536
        ):
            raise ConfigError(
                f"server.port must be an integer in [0, 65535] (0: a free one), got {port!r}"
            )
        if port == 0:
            port = None  # the Server picks a free port
        tls = _tls_settings(args, server_config)
        # Keyword arguments of resound.Server, each an int or None.
        limits: dict[str, Any] = {}
        for key in (
            "max_bytes", "max_message_bytes", "max_open_calls", "max_open_calls_per_connection",
            "max_inflight_bytes", "max_inflight_bytes_per_connection",
        ):  # fmt: skip
            value = getattr(args, key)
            value = server_config.get(key) if value is None else value
            limits[key] = _optional_positive(value, f"server.{key}")
        tables = tables_from_config(config)
    except ConfigError as error:
        print(f"resound-server: {error}", file=sys.stderr)
        return 2

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
            tables, port=port, host=host, checkpointer=checkpointer, tls=tls, **limits
        )
    except (ValueError, RuntimeError, OSError) as error:
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

    for table in tables:
        _log.info("table %s", table)
    while not stop.wait(0.5):
        pass
    if args.checkpoint_on_stop:
        checkpoint("on stop")
    server.stop()
    return 0


def _optional_positive(value: Any, where: str) -> int | None:
    """``value`` if it is None or an integer >= 1; ConfigError naming ``where``."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(f"{where} must be an integer >= 1, got {value!r}")
    return value


def _byte_count(text: str) -> int:
    """``--max-bytes``: an integer, optionally with K, M or G (powers of 1024)."""
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    digits = text[:-1] if scale > 1 else text
    if not digits.isdigit() or int(digits) < 1:
        raise argparse.ArgumentTypeError(
            f"must be a positive integer of bytes, optionally with K, M or G, got {text!r}"
        )
    return int(digits) * scale


def _tls_settings(args: argparse.Namespace, server_config: dict[str, Any]) -> Any:
    """The ServerTls of the --tls-* options (else the config's tls_* keys);
    None for plaintext. ConfigError for an incomplete set or unreadable files."""
    from resound.tls import ServerTls

    paths = {}
    for key in ("tls_cert", "tls_key", "tls_client_ca"):
        value = getattr(args, key) or server_config.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            raise ConfigError(f"server.{key} must be a file path, got {value!r}")
        paths[key] = value
    if paths["tls_cert"] is None and paths["tls_key"] is None:
        if paths["tls_client_ca"] is not None:
            raise ConfigError("--tls-client-ca needs --tls-cert and --tls-key")
        return None
    if paths["tls_cert"] is None or paths["tls_key"] is None:
        raise ConfigError("--tls-cert and --tls-key go together: give both or neither")
    try:
        return ServerTls.from_files(paths["tls_cert"], paths["tls_key"], paths["tls_client_ca"])
    except ValueError as error:
        raise ConfigError(f"TLS: {error}") from None


if __name__ == "__main__":
    sys.exit(main())
