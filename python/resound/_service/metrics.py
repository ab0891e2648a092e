"""Prometheus metrics of a server's tables, served on ``/metrics`` over HTTP.

``TablesCollector`` is a custom prometheus_client collector: at each scrape
it reads every table's info once from the core (one consistent snapshot per
table, under the table's lock) and turns it into metric families, so the
figures are the core's own: nothing is counted twice, nothing runs between
scrapes, and a table's counters cost nothing when nobody scrapes.
``MetricsEndpoint`` serves one collector with prometheus_client's own HTTP
server, on a registry of its own (never the process-wide default registry),
so several servers in one process each serve their own tables.

prometheus_client is optional (``pip install "resound-rl[metrics]"``): it is
imported when an endpoint is made, and only then.

Example:
    >>> import resound, urllib.request
    >>> server = resound.Server([resound.Table.queue('q', 10)], listen=False, metrics_port=0)
    >>> text = urllib.request.urlopen(f'http://127.0.0.1:{server.metrics_port}/metrics').read()
    >>> b'resound_table_items{table="q"} 0.0' in text
    True
    >>> server.stop()
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from resound._table_host import TableHost

__all__ = ["METRICS", "MetricsEndpoint", "TablesCollector", "import_prometheus_client"]

# Every metric: name, type, help. Per table (label `table`) unless the name
# says server; the rate limiter's also by `call` (insert or sample).
# Counters are named without their `_total`, which prometheus_client adds.
METRICS: tuple[tuple[str, str, str], ...] = (
    ("resound_table_items", "gauge", "Items in the table."),
    ("resound_table_max_items", "gauge", "The table's max_size: most items it holds."),
    ("resound_table_bytes", "gauge", "Bytes of the chunks the table's items reference."),
    ("resound_table_max_bytes", "gauge", "The table's max_bytes (tables that have one)."),
    ("resound_table_chunks", "gauge", "Distinct chunks the table's items reference."),
    ("resound_table_episodes", "gauge", "Episodes the table's items come from."),
    ("resound_table_inserts", "counter", "New items inserted (since the last reset)."),
    ("resound_table_samples", "counter", "Items sampled (since the last reset)."),
    ("resound_table_deletes", "counter", "Items removed for any reason (since the last reset)."),
    (
        "resound_table_priority_updates",
        "counter",
        "Keys given a new priority by mutate_priorities.",
    ),
    ("resound_table_mutation_deletes", "counter", "Keys deleted by mutate_priorities."),
    (
        "resound_rate_limiter_blocked_calls",
        "counter",
        "Calls the rate limiter held up (each counted once, however long).",
    ),
    (
        "resound_rate_limiter_blocked_seconds",
        "counter",
        "Seconds calls spent held up by the rate limiter, summed over calls.",
    ),
    ("resound_rate_limiter_waiting_calls", "gauge", "Calls held up by the rate limiter now."),
    ("resound_server_open_calls", "gauge", "Long-lived gRPC calls open (insert and sample)."),
    ("resound_server_connections", "gauge", "Client connections with a long-lived call open."),
)
_CALLS = (("insert", "inserts"), ("sample", "samples"))


def import_prometheus_client() -> Any:
    """The prometheus_client module, or ImportError saying how to install it."""
    try:
        import prometheus_client
        import prometheus_client.core  # the metric families of custom collectors
    except ImportError:
        raise ImportError(
            'metrics need prometheus_client: pip install "resound-rl[metrics]" '
            '(or pip install "prometheus_client>=0.20")'
        ) from None
    return prometheus_client


class TablesCollector:
    """Metric families of ``host``'s tables (and, when ``calls`` is given, of
    its gRPC calls: a function returning open calls and connections)."""

    def __init__(self, host: TableHost, calls: Callable[[], tuple[int, int]] | None = None) -> None:
        self._host = host
        self._calls = calls
        self._families = import_prometheus_client().core

    def describe(self) -> Iterator[Any]:
        """The families without samples (the registry checks names with them)."""
        return iter(self._empty().values())

    def collect(self) -> Iterator[Any]:
        """One snapshot of every table's info, as metric families."""
        families = self._empty()
        for name, table in self._host.tables.items():
            info = table._core.info()  # one consistent snapshot of the table
            limiter = info.rate_limiter
            labels = [name]
            for metric, value in (
                ("resound_table_items", info.current_size),
                ("resound_table_max_items", info.max_size),
                ("resound_table_bytes", info.memory_bytes),
                ("resound_table_chunks", info.num_chunks),
                ("resound_table_episodes", info.num_episodes),
                ("resound_table_inserts", limiter["inserts"]),
                ("resound_table_samples", limiter["samples"]),
                ("resound_table_deletes", limiter["deletes"]),
                ("resound_table_priority_updates", info.num_priority_updates),
                ("resound_table_mutation_deletes", info.num_mutate_deletes),
            ):
                families[metric].add_metric(labels, value)
            if info.max_bytes:
                families["resound_table_max_bytes"].add_metric(labels, info.max_bytes)
            for call, side in _CALLS:
                call_labels = [name, call]
                families["resound_rate_limiter_blocked_calls"].add_metric(
                    call_labels, limiter[f"blocked_{side}"]
                )
                families["resound_rate_limiter_blocked_seconds"].add_metric(
                    call_labels, limiter[f"blocked_{call}_seconds"]
                )
                families["resound_rate_limiter_waiting_calls"].add_metric(
                    call_labels, limiter[f"waiting_{side}"]
                )
        if self._calls is None:
            del families["resound_server_open_calls"], families["resound_server_connections"]
        else:
            open_calls, connections = self._calls()
            families["resound_server_open_calls"].add_metric([], open_calls)
            families["resound_server_connections"].add_metric([], connections)
        return iter(families.values())

    def _empty(self) -> dict[str, Any]:
        made = {}
        for name, kind, text in METRICS:
            if name.startswith("resound_server_"):
                labels = []
            elif name.startswith("resound_rate_limiter_"):
                labels = ["table", "call"]
            else:
                labels = ["table"]
            family = (
                self._families.CounterMetricFamily
                if kind == "counter"
                else self._families.GaugeMetricFamily
            )
            made[name] = family(name, text, labels=labels)
        return made


class MetricsEndpoint:
    """Serves ``collector`` on ``http://host:port/metrics`` (port 0: a free
    one; ``port`` tells which) until ``stop()``. ValueError if the port is
    taken or the host is not this machine's."""

    def __init__(self, collector: TablesCollector, host: str, port: int) -> None:
        prometheus_client = import_prometheus_client()
        registry = prometheus_client.CollectorRegistry(auto_describe=False)
        registry.register(collector)
        try:
            served = prometheus_client.start_http_server(port, addr=host, registry=registry)
            self._httpd: Any = served[0]
            self._thread: Any = served[1]  # None once stopped
        except OSError as error:
            raise ValueError(
                f"cannot serve metrics on {host}:{port}: {error.strerror or error} (the port "
                "is in use, or the host is not an address of this machine)"
            ) from None
        self._host = host

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self.port}/metrics"

    def stop(self) -> None:
        """Stops serving and closes the socket (idempotent)."""
        if self._thread is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()
        self._thread = None
