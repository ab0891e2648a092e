"""Prometheus metrics: ``Server(metrics_port=...)`` serves the tables'
figures on ``/metrics`` over HTTP, read from the core at each scrape; the
counters behind them also reach clients through ``Client.server_info()``
on both transports."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

import resound
from resound import rate_limiters, selectors
from resound._transport import local_servers

from helpers.waiting import SAFETY


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the server's /metrics: {(name, labels): value}."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=SAFETY) as answer:
        assert answer.status == 200
        text = answer.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def of(samples: dict, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def replay_table(name: str = "replay") -> resound.Table:
    # Fifo sampling keeps the first item sampled: its key is known.
    return resound.Table(
        name, selectors.Fifo(), selectors.Fifo(), 100, rate_limiters.MinSize(1), max_bytes=1 << 30
    )


@pytest.fixture(params=["embedded", "grpc"])
def served(request):
    """(server, client) with metrics on a free port, over each transport."""
    tables = [replay_table(), resound.Table.queue("queue", 10)]
    if request.param == "embedded":
        server = resound.Server(tables, listen=False, metrics_port=0)
        client = server.in_process_client()
    else:
        server = resound.Server(tables, metrics_port=0)
        client = resound.Client(f"127.0.0.1:{server.port}", transport="grpc")
    yield server, client
    server.stop()


def traffic(client: resound.Client) -> None:
    """3 inserts, 2 samples, a priority update and a delete (each with a
    missing key that must not count), one sample held up by the queue."""
    for step in range(3):
        client.insert(np.full(4, step, np.float32), priorities={"replay": 1.0})
    first = [sample.info.key for sample in client.sample("replay", 2, emit_timesteps=False)]
    assert first[0] == first[1]
    client.mutate_priorities("replay", updates={first[0]: 5.0, 123456789: 1.0})
    client.mutate_priorities("replay", deletes=[first[0], 987654321])
    with pytest.raises(resound.DeadlineExceededError):
        next(client.sample("queue", timeout=0.05))


def test_a_scrape_shows_each_tables_figures(served):
    server, client = served
    assert server.metrics_port is not None and server.metrics_port > 0
    traffic(client)
    samples = scrape(server.metrics_port)
    expected = {
        "resound_table_items": 2,
        "resound_table_max_items": 100,
        "resound_table_max_bytes": 1 << 30,
        "resound_table_chunks": 2,
        "resound_table_episodes": 2,
        "resound_table_inserts_total": 3,
        "resound_table_samples_total": 2,
        "resound_table_deletes_total": 1,
        "resound_table_priority_updates_total": 1,
        "resound_table_mutation_deletes_total": 1,
    }
    for name, value in expected.items():
        assert of(samples, name, table="replay") == value, name
    assert of(samples, "resound_table_bytes", table="replay") == (
        server.table("replay")._core.info().memory_bytes
    )
    assert of(samples, "resound_table_bytes", table="replay") >= 2 * 4 * 4
    assert of(samples, "resound_table_items", table="queue") == 0
    assert ("resound_table_max_bytes", (("table", "queue"),)) not in samples  # it has none
    blocked = {"table": "queue", "call": "sample"}
    assert of(samples, "resound_rate_limiter_blocked_calls_total", **blocked) == 1
    assert of(samples, "resound_rate_limiter_blocked_seconds_total", **blocked) > 0
    assert of(samples, "resound_rate_limiter_waiting_calls", **blocked) == 0
    inserts = {"table": "queue", "call": "insert"}
    assert of(samples, "resound_rate_limiter_blocked_calls_total", **inserts) == 0
    if server.port is None:  # embedded: no gRPC calls to count
        assert not any(name.startswith("resound_server_") for name, _ in samples)
    else:
        # The client keeps its streams open (inserts, samples, mutations),
        # all on one connection.
        assert of(samples, "resound_server_open_calls") == server.open_calls > 0
        assert of(samples, "resound_server_connections") == 1


def test_server_info_reports_the_same_counters(served):
    server, client = served
    traffic(client)
    info = client.server_info()
    replay, queue = info["replay"], info["queue"]
    assert (replay.num_priority_updates, replay.num_mutate_deletes) == (1, 1)
    assert (queue.num_priority_updates, queue.num_mutate_deletes) == (0, 0)
    limiter = queue.rate_limiter_info
    assert (limiter.blocked_inserts, limiter.blocked_samples) == (0, 1)
    assert limiter.blocked_insert_seconds == 0
    assert (
        0
        < limiter.blocked_sample_seconds
        == pytest.approx(
            scrape(server.metrics_port)[
                (
                    "resound_rate_limiter_blocked_seconds_total",
                    (("call", "sample"), ("table", "queue")),
                )
            ]
        )
    )
    # Reverb's fields are unchanged beside them.
    assert replay.rate_limiter_info.insert_stats.completed == 3
    assert replay.rate_limiter_info.delete_stats.completed == 1


def test_each_scrape_reads_the_core_again(served):
    server, client = served
    with pytest.raises(resound.DeadlineExceededError):
        next(client.sample("queue", timeout=0.05))
    first = scrape(server.metrics_port)
    labels = (("call", "sample"), ("table", "queue"))
    seconds = first[("resound_rate_limiter_blocked_seconds_total", labels)]
    assert seconds > 0
    # A scrape reads the core again: the figures are not cached.
    with pytest.raises(resound.DeadlineExceededError):
        next(client.sample("queue", timeout=0.05))
    second = scrape(server.metrics_port)
    assert second[("resound_rate_limiter_blocked_calls_total", labels)] == 2
    assert second[("resound_rate_limiter_blocked_seconds_total", labels)] > seconds


def test_open_calls_and_connections_are_counted():
    server = resound.Server([resound.Table.queue("queue", 10)], metrics_port=0)
    try:
        client = resound.Client(f"127.0.0.1:{server.port}", transport="grpc")
        samples = client.sample("queue", timeout=SAFETY)
        taken = []
        thread = threading.Thread(target=lambda: taken.append(next(samples)), daemon=True)
        thread.start()
        deadline = time.monotonic() + SAFETY
        # The call opens before it reaches the table's rate limiter: both
        # show once it waits there.
        while True:
            now = scrape(server.metrics_port)
            waiting = of(now, "resound_rate_limiter_waiting_calls", table="queue", call="sample")
            if of(now, "resound_server_open_calls") == 1 and waiting == 1:
                break
            assert time.monotonic() < deadline, "the sample call never showed as open and waiting"
        assert of(now, "resound_server_connections") == 1
        client.insert(1.0, priorities={"queue": 1.0})
        thread.join(SAFETY)
        assert len(taken) == 1
    finally:
        server.stop()


def test_two_servers_in_one_process_serve_their_own_tables():
    first = resound.Server([resound.Table.queue("first", 10)], listen=False, metrics_port=0)
    second = resound.Server([resound.Table.queue("second", 20)], metrics_port=0)
    try:
        assert first.metrics_port != second.metrics_port
        first.in_process_client().insert(1.0, priorities={"first": 1.0})
        one, two = scrape(first.metrics_port), scrape(second.metrics_port)
        assert of(one, "resound_table_items", table="first") == 1
        assert of(two, "resound_table_max_items", table="second") == 20
        assert not any(dict(labels).get("table") == "second" for _, labels in one)
        assert not any(dict(labels).get("table") == "first" for _, labels in two)
    finally:
        first.stop()
        second.stop()


def test_stop_closes_the_metrics_endpoint():
    server = resound.Server([resound.Table.queue("q", 10)], metrics_port=0)
    port = server.metrics_port
    assert port is not None
    scrape(port)
    server.stop()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=SAFETY)


def test_no_metrics_unless_asked():
    server = resound.Server([resound.Table.queue("q", 10)], listen=False)
    try:
        assert server.metrics_port is None
    finally:
        server.stop()


@pytest.mark.parametrize("port", [-1, 65536, 1.5, True, "9090"])
def test_a_bad_metrics_port_is_refused(port):
    with pytest.raises(ValueError, match=r"metrics_port must be an int in \[0, 65535\]"):
        resound.Server([resound.Table.queue("q", 10)], listen=False, metrics_port=port)


def test_a_taken_metrics_port_is_refused_before_grpc_serves():
    holder = resound.Server([resound.Table.queue("q", 10)], listen=False, metrics_port=0)
    try:
        before = len(local_servers.listening_servers())
        taken = f"cannot serve metrics on 127.0.0.1:{holder.metrics_port}"
        with pytest.raises(ValueError, match=taken):
            resound.Server([resound.Table.queue("q", 10)], metrics_port=holder.metrics_port)
        assert len(local_servers.listening_servers()) == before
    finally:
        holder.stop()


def test_without_prometheus_client_it_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # as if not installed
    with pytest.raises(ImportError, match=r'pip install "resound-rl\[metrics\]"'):
        resound.Server([resound.Table.queue("q", 10)], listen=False, metrics_port=0)


def test_the_start_line_names_the_metrics_address(caplog):
    caplog.set_level("INFO", logger="resound.server")
    server = resound.Server([resound.Table.queue("q", 10)], metrics_port=0)
    try:
        line = f"metrics on http://127.0.0.1:{server.metrics_port}/metrics"
        assert any(
            record.name == "resound.server"
            and f"on 127.0.0.1:{server.port}" in record.getMessage()
            and line in record.getMessage()
            for record in caplog.records
        )
    finally:
        server.stop()


def test_a_client_of_several_servers_sums_the_counters():
    servers = [resound.Server([replay_table()]) for _ in range(2)]
    try:
        for count, server in enumerate(servers, start=1):
            local = server.in_process_client()
            local.insert(np.zeros(4, np.float32), priorities={"replay": 1.0})
            key = next(local.sample("replay", emit_timesteps=False)).info.key
            for _ in range(count):
                local.mutate_priorities("replay", updates={key: 2.0})
        client = resound.Client([f"127.0.0.1:{server.port}" for server in servers])
        info = client.server_info(timeout=SAFETY)["replay"]
        assert info.num_priority_updates == 1 + 2
        assert info.num_mutate_deletes == 0
        assert info.rate_limiter_info.blocked_samples == 0
    finally:
        for server in servers:
            server.stop()


def test_only_a_server_with_metrics_loads_prometheus_client():
    code = (
        "import sys, resound\n"
        "server = resound.Server([resound.Table.queue('q', 10)])\n"
        "loaded = 'prometheus_client' in sys.modules\n"
        "server.stop()\n"
        "server = resound.Server([resound.Table.queue('q', 10)], listen=False, metrics_port=0)\n"
        "print(loaded, 'prometheus_client' in sys.modules)\n"
        "server.stop()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=SAFETY
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "True"]
