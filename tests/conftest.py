"""Shared helpers for tests of resound._core.

Chunks are made with `chunk_factory`, which keeps handles alive for the test's
duration (a chunk lives only while a handle or an item references it).
"""

from __future__ import annotations

import itertools
import logging
import queue
import re
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import resound
from resound import _core

# Bound for joins and polls that end at once when the code under test is
# correct; never used as the timeout of a blocking call being tested.
SAFETY = 20.0

# A resound-server config table: Uniform sampling of up to 100,000 items,
# ready to sample from the first one.
REPLAY_TABLE_TOML = """
[[tables]]
name = "replay"
sampler = "uniform"
remover = "fifo"
max_size = 100000
rate_limiter = { kind = "min_size", min_size_to_sample = 1 }
"""


def column(chunk_key: int, offset: int = 0, length: int = 1, squeeze: bool = False) -> tuple:
    """A one-slice trajectory column."""
    return ([(chunk_key, offset, length)], squeeze)


def trajectory(chunk_key: int, offset: int = 0, length: int = 1) -> list:
    """A one-column trajectory over rows [offset, offset+length) of a chunk."""
    return [column(chunk_key, offset, length)]


@pytest.fixture
def store() -> _core.ChunkStore:
    return _core.ChunkStore()


@pytest.fixture
def chunk_factory(store: _core.ChunkStore) -> Iterator[Callable[..., _core.Chunk]]:
    """Returns make(num_steps=4, episode_id=0, shape=(3,), key=None) -> Chunk."""
    handles: list[_core.Chunk] = []
    keys = itertools.count(1_000_000)

    def make(
        num_steps: int = 4,
        episode_id: int = 0,
        shape: tuple[int, ...] = (3,),
        key: int | None = None,
        dtype: str = "<f4",
    ) -> _core.Chunk:
        key = next(keys) if key is None else key
        data = np.arange(num_steps * int(np.prod(shape)), dtype=np.dtype(dtype))
        chunk = store.add(key, data, dtype, shape, num_steps, episode_id=episode_id)
        handles.append(chunk)
        return chunk

    yield make
    handles.clear()


def make_table(
    store: _core.ChunkStore,
    sampler: str = "uniform",
    remover: str = "fifo",
    max_size: int = 100,
    rate_limiter: _core.RateLimiter | None = None,
    max_times_sampled: int = 0,
    priority_exponent: float = 1.0,
    seed: int | None = 0,
    name: str = "table",
) -> _core.Table:
    def selector(kind: str) -> _core.ItemSelector:
        if kind == "prioritized":
            return _core.make_selector(kind, priority_exponent, seed=seed)
        if kind == "uniform":
            return _core.make_selector(kind, seed=seed)
        return _core.make_selector(kind)

    return _core.Table(
        name,
        selector(sampler),
        selector(remover),
        max_size,
        rate_limiter if rate_limiter is not None else _core.RateLimiter.min_size(1),
        max_times_sampled=max_times_sampled,
        chunk_store=store,
    )


@pytest.fixture
def tables(store: _core.ChunkStore) -> Iterator[Callable[..., _core.Table]]:
    """make(**make_table kwargs) -> Table; every table is closed at teardown so
    a failing test never leaves a thread blocked."""
    made: list[_core.Table] = []

    def make(**kwargs: Any) -> _core.Table:
        table = make_table(store, **kwargs)
        made.append(table)
        return table

    yield make
    for table in made:
        table.close()


def table_counters(table: _core.Table) -> tuple[int, int, int]:
    """(inserts, samples, deletes) of a table's rate limiter."""
    info = table.info().rate_limiter
    return info["inserts"], info["samples"], info["deletes"]


def check_accounting(table: _core.Table) -> list[_core.ItemSnapshot]:
    """Checks that the table's size, chunk, memory and episode figures agree
    with its items; returns the snapshot it checked against."""
    info = table.info()
    assert info.rate_limiter["inserts"] - info.rate_limiter["deletes"] == info.current_size
    assert info.current_size <= info.max_size
    snapshot = table.snapshot()
    assert len(snapshot) == info.current_size
    chunks = {c.key: c for item in snapshot for c in item.chunks}
    assert info.num_chunks == len(chunks)
    assert info.memory_bytes == sum(c.memory_bytes for c in chunks.values())
    assert info.num_episodes == len({c.episode_id for c in chunks.values()})
    return snapshot


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = SAFETY) -> None:
    """Polls state (no sleeping) until `predicate` holds; fails after `timeout`."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"


class Background:
    """Runs fn(*args, **kwargs) on a daemon thread and records the outcome."""

    def __init__(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn, args, kwargs), daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
        try:
            self.result = fn(*args, **kwargs)
        except BaseException as error:  # noqa: BLE001 - re-raised in the test thread
            self.error = error

    def done(self) -> bool:
        return not self._thread.is_alive()

    def join(self, timeout: float = SAFETY) -> Background:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "background call did not finish"
        return self

    def value(self) -> Any:
        self.join()
        if self.error is not None:
            raise self.error
        return self.result

    def raised(self, expected: type[BaseException]) -> BaseException:
        self.join()
        assert isinstance(self.error, expected), f"expected {expected.__name__}, got {self.error!r}"
        return self.error


# For tests of what only the in-process transport promises: an item is in
# its table when create_item returns (if its chunks are complete and the rate
# limiter admits it), and rate-limited items wait in the writer itself. Over
# gRPC items are confirmed asynchronously (flush waits for them), as in Reverb.
in_process_only = pytest.mark.parametrize("serve", ["embedded"], indirect=True)


@pytest.fixture(params=["embedded", "grpc"])
def serve(request: Any) -> Iterator[Callable[..., tuple[resound.Server, resound.Client]]]:
    """serve(*tables) -> (server, client) over each transport: an embedded
    server with an in-process client, and a server on a 127.0.0.1 port it
    picks with a gRPC client. Servers stop at teardown."""
    servers: list[resound.Server] = []

    def make(*tables: resound.Table) -> tuple[resound.Server, resound.Client]:
        if request.param == "embedded":
            server = resound.Server(list(tables), listen=False)
            servers.append(server)
            return server, server.in_process_client()
        server = resound.Server(list(tables))
        servers.append(server)
        return server, resound.Client(f"127.0.0.1:{server.port}", transport="grpc")

    yield make
    for server in servers:
        server.stop()


# --- checkpoint files, record by record (to make ones no server writes)


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), as checkpoint records are checksummed."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def records_of(data: bytes) -> list[tuple[int, bytes]]:
    """The (type, payload) records of a checkpoint, end record excluded."""
    records, offset = [], 16
    while True:
        kind, length = struct.unpack_from("<IQ", data, offset)
        payload = data[offset + 12 : offset + 12 + length]
        offset += 12 + length + 4
        if kind == 0xFFFFFFFF:
            return records
        records.append((kind, payload))


def file_of(header: bytes, records: list[tuple[int, bytes]]) -> bytes:
    """A checkpoint of ``records`` with every checksum and the count right."""
    parts = [header]
    for kind, payload in [*records, (0xFFFFFFFF, struct.pack("<Q", len(records)))]:
        head = struct.pack("<IQ", kind, len(payload))
        parts += [head, payload, struct.pack("<I", crc32c(head + payload))]
    return b"".join(parts)


def server_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "resound.server_command", *args]


def refused_start(*args: str) -> str:
    """Runs ``resound-server`` with ``args``, expecting it to refuse to start
    (exit status 2); what it printed on stderr."""
    result = subprocess.run(server_command(*args), capture_output=True, text=True, timeout=SAFETY)
    assert result.returncode == 2, (result.returncode, result.stderr)
    return result.stderr


class ServerProcess:
    """A resound-server process (``--config config`` and ``args``) and the
    lines it logs."""

    def __init__(self, config: Path, *args: str) -> None:
        self.process = subprocess.Popen(
            server_command("--config", str(config), *args),
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        self._start_reader()

    def _start_reader(self) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Signals the server, waits for it to exit; its exit status."""
        self.process.send_signal(sig)
        status = self.process.wait(timeout=SAFETY)
        self._reader.join(SAFETY)
        assert self.process.stderr is not None
        self.process.stderr.close()
        return status

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.put(line)
        self.lines.put("")

    def wait_for(self, pattern: str) -> re.Match[str]:
        """The first line to come that matches ``pattern``; fails after SAFETY
        seconds in all (a server logging periodically never goes quiet)."""
        seen = []
        deadline = time.monotonic() + SAFETY
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(
                    f"the server logged no line matching {pattern!r}: {''.join(seen)}"
                ) from None
            seen.append(line)
            assert line, f"the server exited before logging {pattern!r}: {''.join(seen)}"
            match = re.search(pattern, line)
            if match:
                return match


class Warnings(logging.Handler):
    """The ``resound`` logger's warnings that contain ``text``; ``seen`` is
    set by the first."""

    def __init__(self, text: str) -> None:
        super().__init__(logging.WARNING)
        self.text = text
        self.messages: list[str] = []
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if self.text in message:
            self.messages.append(message)
            self.seen.set()

    def wait(self, timeout: float) -> bool:
        return self.seen.wait(timeout)
