"""The TOML config of ``resound-server``: reading it, checking it whole, and
building the tables and server settings it describes.

Every problem is a ``ConfigError`` whose message names the key (or option)
and its allowed values, raised before anything starts. The settings come
from the command's options first, then the config's ``[server]`` table.

Example:
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / 'server.toml'
    >>> _ = path.write_text(EXAMPLE_CONFIG)
    >>> [table.name for table in tables_from_config(load_config(str(path)))]
    ['replay', 'queue']
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from collections.abc import Sequence
from typing import Any

__all__ = [
    "EXAMPLE_CONFIG",
    "ConfigError",
    "ServerSettings",
    "load_config",
    "server_settings",
    "tables_from_config",
    "tls_settings",
]

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
# metrics_port = 9090          # Prometheus metrics on http://host:9090/metrics (0: a free port)
# local_transport = false      # serve gRPC only: no same-host transport (default true)

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


# The keys of [server], each also an option of the command.
_SERVER_KEYS = (
    "host", "port", "max_bytes", "max_message_bytes", "max_open_calls",
    "max_open_calls_per_connection", "max_inflight_bytes",
    "max_inflight_bytes_per_connection", "tls_cert", "tls_key", "tls_client_ca",
    "metrics_port", "local_transport",
)  # fmt: skip
# The keyword arguments of resound.Server that are limits: an int >= 1 or None.
_LIMIT_KEYS = (
    "max_bytes", "max_message_bytes", "max_open_calls", "max_open_calls_per_connection",
    "max_inflight_bytes", "max_inflight_bytes_per_connection",
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class ServerSettings:
    """What the command starts: the tables and resound.Server's arguments."""

    tables: list[Any]
    host: str
    port: int | None  # None: a free one
    tls: Any  # a resound.tls.ServerTls, or None for plaintext
    limits: dict[str, Any]  # keyword arguments of resound.Server: int or None
    metrics_port: int | None  # None: no metrics; 0: a free port
    local_transport: bool  # also serve the same-host transport


def server_settings(args: argparse.Namespace) -> ServerSettings:
    """Checks the command's options and its config (``args.config``) whole;
    ConfigError names the first bad one."""
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
    unknown = set(server_config) - set(_SERVER_KEYS)
    if unknown:
        raise ConfigError(
            f"server: unknown key(s) {sorted(unknown)}; allowed: {', '.join(_SERVER_KEYS)}"
        )
    host = args.host or server_config.get("host", "127.0.0.1")
    if not isinstance(host, str) or not host:
        raise ConfigError(f"server.host must be a nonempty string, got {host!r}")
    port = _port(args.port, server_config, "port")
    metrics_port = _port(args.metrics_port, server_config, "metrics_port")
    local_transport = args.local_transport
    if local_transport is None:
        local_transport = server_config.get("local_transport", True)
    if not isinstance(local_transport, bool):
        raise ConfigError(f"server.local_transport must be true or false, got {local_transport!r}")
    tls = tls_settings(args, server_config)
    limits: dict[str, Any] = {}
    for key in _LIMIT_KEYS:
        value = getattr(args, key)
        value = server_config.get(key) if value is None else value
        limits[key] = _optional_positive(value, f"server.{key}")
    return ServerSettings(
        tables=tables_from_config(config),
        host=host,
        port=port or None,  # 0: the Server picks a free port
        tls=tls,
        limits=limits,
        metrics_port=metrics_port,
        local_transport=local_transport,
    )


def _port(option: int | None, server_config: dict[str, Any], key: str) -> int | None:
    """The option's port, else the config's; ConfigError unless in [0, 65535]."""
    port = option if option is not None else server_config.get(key)
    if port is not None and (
        not isinstance(port, int) or isinstance(port, bool) or not 0 <= port < 65536
    ):
        raise ConfigError(
            f"server.{key} must be an integer in [0, 65535] (0: a free one), got {port!r}"
        )
    return port


def _optional_positive(value: Any, where: str) -> int | None:
    """``value`` if it is None or an integer >= 1; ConfigError naming ``where``."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(f"{where} must be an integer >= 1, got {value!r}")
    return value


def tls_settings(args: argparse.Namespace, server_config: dict[str, Any]) -> Any:
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
