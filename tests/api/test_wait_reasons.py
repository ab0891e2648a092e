"""Why calls wait: rate-limiter timeouts say why in the user's terms, the
same on every transport, and calls that wait long warn on the
``resound.writer`` / ``resound.sampler`` loggers (docs/semantics.md,
"Timeouts and the rate limiter").

The warnings are tested with a small threshold and real blocked calls:
each test waits for the warning record (an event set by a log handler, no
sleeping), then unblocks the call from the test thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import resound
from resound import rate_limiters, wait_warnings
from resound.errors import DeadlineExceededError

from helpers.waiting import SAFETY, Background

EMPTY = "table 't' has 0 items; MinSize(1) needs 1 before sampling"
FULL = (
    "table 'q': Queue(1) needs 1 more sample before inserting (1 item, 1 insert and "
    "0 samples so far)"
)


def _min_size_table() -> resound.Table:
    return resound.Table(
        "t",
        resound.selectors.Uniform(),
        resound.selectors.Fifo(),
        100,
        rate_limiters.MinSize(1),
    )


class _Records(logging.Handler):
    """Collects the records of ``logger`` whose message holds ``needle``;
    ``wait(n)`` blocks until n have come."""

    def __init__(self, needle: str) -> None:
        super().__init__(logging.DEBUG)
        self.needle = needle
        self.records: list[logging.LogRecord] = []
        self._cv = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        if self.needle in record.getMessage():
            with self._cv:
                self.records.append(record)
                self._cv.notify_all()

    def wait(self, count: int = 1) -> list[logging.LogRecord]:
        with self._cv:
            assert self._cv.wait_for(lambda: len(self.records) >= count, SAFETY), (
                f"no {count} records with {self.needle!r}: {self.records}"
            )
            return list(self.records)


@pytest.fixture
def records() -> Iterator[Callable[[str], _Records]]:
    handlers: list[_Records] = []
    logger = logging.getLogger("resound")

    def make(needle: str) -> _Records:
        handler = _Records(needle)
        logger.addHandler(handler)
        handlers.append(handler)
        return handler

    yield make
    for handler in handlers:
        logger.removeHandler(handler)


@pytest.fixture
def quick_warnings() -> Iterator[None]:
    before = resound.wait_warning_seconds()
    resound.set_wait_warning(0.05)
    yield
    resound.set_wait_warning(before)


# --- timeouts say why, alike on both transports


def test_a_sample_timeout_names_the_limiter_as_built(serve: Any) -> None:
    _, client = serve(_min_size_table())
    with pytest.raises(DeadlineExceededError) as raised:
        next(client.sample("t", timeout=0.05))
    assert str(raised.value) == EMPTY
    with pytest.raises(DeadlineExceededError) as raised:
        client.sample_batch("t", 4, timeout=0.05)
    assert str(raised.value) == EMPTY
    assert isinstance(raised.value, TimeoutError)


def test_a_writer_timeout_says_what_the_limiter_needs(serve: Any) -> None:
    _, client = serve(resound.Table.queue("q", 1))
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
        for step in range(2):
            writer.append({"x": np.float32(step)})
            writer.create_item("q", 1.0, {"x": writer.history["x"][-1:]})
        with pytest.raises(DeadlineExceededError) as raised:
            writer.flush(timeout_ms=50)
        assert str(raised.value) == (
            f"Flush call did not complete within provided timeout of 0:00:00.050000: {FULL}"
        )
        next(client.sample("q"))
        writer.flush(timeout_ms=int(SAFETY * 1000))  # as the message said
    assert client.server_info()["q"].current_size == 1


def test_an_insert_timeout_says_what_the_limiter_needs(serve: Any) -> None:
    _, client = serve(resound.Table.queue("q", 1))
    client.insert([1.0], {"q": 1.0})
    with pytest.raises(DeadlineExceededError) as raised:
        client.insert([2.0], {"q": 1.0}, timeout=0.05)
    assert str(raised.value) == FULL


def test_several_servers_say_why_each_gave_nothing() -> None:
    servers = [resound.Server([_min_size_table()]) for _ in range(2)]
    try:
        addresses = [f"127.0.0.1:{s.port}" for s in servers]
        client = resound.Client(addresses)
        with pytest.raises(DeadlineExceededError) as raised:
            client.sample_batch("t", 2, timeout=0.05)
        text = str(raised.value)
        assert text.startswith(
            "sample_batch from table 't': no server gave a sample within the timeout"
        )
        # Each server asked says why, by address (a share of 2 samples may
        # go to one server only).
        reasons = text.split("within the timeout: ", 1)[1].split(" | ")
        assert reasons
        for reason in reasons:
            assert reason in [f"{address}: {EMPTY}" for address in addresses]
    finally:
        for server in servers:
            server.stop()


# --- long waits warn, where the call waits


def test_a_blocked_writer_warns_until_it_is_unblocked(
    serve: Any, quick_warnings: None, records: Any, caplog: pytest.LogCaptureFixture
) -> None:
    _, client = serve(resound.Table.queue("q", 1))
    seen = records("writer blocked")
    writer = client.trajectory_writer(num_keep_alive_refs=1)
    for step in range(2):
        writer.append({"x": np.float32(step)})
        writer.create_item("q", 1.0, {"x": writer.history["x"][-1:]})
    with caplog.at_level(logging.WARNING, logger="resound.writer"):
        flush = Background(writer.flush)
        seen.wait(2)  # once past the threshold, and again a threshold later
        assert not flush.done()
        next(client.sample("q"))
        flush.value()
    writer.close()
    lines = [r for r in caplog.records if r.name == "resound.writer"]
    assert len(lines) >= 2
    for record in lines:
        assert record.levelno == logging.WARNING
        assert record.getMessage().startswith("writer blocked ")
        assert record.getMessage().endswith(f" s: {FULL}")


def test_a_blocked_insert_warns(
    serve: Any, quick_warnings: None, records: Any, caplog: pytest.LogCaptureFixture
) -> None:
    _, client = serve(resound.Table.queue("q", 1))
    client.insert([1.0], {"q": 1.0})
    seen = records("insert blocked")
    with caplog.at_level(logging.WARNING, logger="resound.writer"):
        insert = Background(client.insert, [2.0], {"q": 1.0})
        [record] = seen.wait(1)[:1]
        next(client.sample("q"))
        insert.value()
    assert record.name == "resound.writer"
    assert record.getMessage().endswith(f" s: {FULL}")
    assert client.server_info()["q"].current_size == 1


def test_a_blocked_sampler_warns(
    serve: Any, quick_warnings: None, records: Any, caplog: pytest.LogCaptureFixture
) -> None:
    _, client = serve(_min_size_table())
    seen = records("sampler blocked")
    with caplog.at_level(logging.WARNING, logger="resound.sampler"):
        sample = Background(lambda: next(client.sample("t", emit_timesteps=False)))
        seen.wait(2)
        client.insert([7.0], {"t": 1.0})
        assert sample.value().data[0] == 7.0
    lines = [r for r in caplog.records if r.name == "resound.sampler"]
    assert len(lines) >= 2
    assert all(r.getMessage().endswith(f" s: {EMPTY}") for r in lines)


def test_a_blocked_batch_iterator_warns(serve: Any, quick_warnings: None, records: Any) -> None:
    _, client = serve(_min_size_table())
    seen = records("sampler blocked")
    with client.sample_batches("t", 1, num_batches=1) as batches:
        [record] = seen.wait(1)[:1]
        client.insert([3.0], {"t": 1.0})
        [batch] = list(batches)
    assert batch.data[0].shape[0] == 1
    assert record.getMessage().endswith(EMPTY)


def test_no_warning_when_turned_off(serve: Any, caplog: pytest.LogCaptureFixture) -> None:
    before = resound.wait_warning_seconds()
    resound.set_wait_warning(None)
    try:
        _, client = serve(_min_size_table())
        with (
            caplog.at_level(logging.WARNING, logger="resound"),
            pytest.raises(DeadlineExceededError),
        ):
            next(client.sample("t", timeout=0.2))
        assert not [r for r in caplog.records if "blocked" in r.getMessage()]
    finally:
        resound.set_wait_warning(before)


# --- the setting


def test_the_threshold_is_checked() -> None:
    with pytest.raises(ValueError, match="seconds must be a number of seconds > 0 or None"):
        resound.set_wait_warning(0)
    with pytest.raises(ValueError, match="got nan"):
        resound.set_wait_warning(float("nan"))
    with pytest.raises(TypeError, match="got '30'"):
        resound.set_wait_warning("30")  # type: ignore[arg-type]
    assert resound.wait_warning_seconds() == wait_warnings.DEFAULT_WAIT_WARNING_SECONDS


@pytest.mark.parametrize(
    ("text", "expected"), [("12.5", 12.5), ("off", None), ("0", None), ("", None)]
)
def test_the_environment_sets_the_default(
    monkeypatch: pytest.MonkeyPatch, text: str, expected: float | None
) -> None:
    monkeypatch.setenv("RESOUND_WAIT_WARNING_SECONDS", text)
    assert wait_warnings._from_environment() == expected


def test_a_bad_environment_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESOUND_WAIT_WARNING_SECONDS", "soon")
    with pytest.raises(ValueError, match="RESOUND_WAIT_WARNING_SECONDS must be a number"):
        wait_warnings._from_environment()


# --- the reason itself, from Python


def test_tables_and_limiters_say_why_they_block() -> None:
    table = resound.Table.queue("q", 2)
    assert table.why_blocked() == "table 'q' has 0 items; Queue(2) needs 1 before sampling"
    with pytest.raises(TypeError, match="insert must be True or False, got 1"):
        table.why_blocked(1)  # type: ignore[arg-type]
    ratio = rate_limiters.SampleToInsertRatio(samples_per_insert=4.0, min_size_to_sample=1,
                                              error_buffer=10.0)  # fmt: skip
    assert ratio.kind == (
        "SampleToInsertRatio(samples_per_insert=4.0, min_size_to_sample=1, error_buffer=10.0)"
    )
    assert rate_limiters.Stack(3).kind == "Stack(3)"
    assert rate_limiters.MinSize(5).kind == "MinSize(5)"
    core = ratio.internal_limiter
    while core.can_insert():
        core.record_insert()
    assert core.why_blocked(True) == (
        f"the table: {ratio.kind} needs 2 more samples before inserting "
        "(3 items, 3 inserts and 0 samples so far)"
    )
