"""Reverb's legacy Writer (Client.writer): items written, sampled back and
compared with what was appended, over both transports; its arguments,
every error, and that a failed call changes nothing."""

from __future__ import annotations

import gc
import inspect
import logging
import re
from typing import Any

import numpy as np
import pytest

import resound
from resound import rate_limiters, selectors

from helpers.waiting import Background, wait_until

QUEUE = "queue"


def queue_table(max_size: int = 100, signature: Any = None) -> resound.Table:
    return resound.Table.queue(QUEUE, max_size, signature=signature)


def drain(client: resound.Client, count: int, table: str = QUEUE) -> list[list[np.ndarray]]:
    """The data of the next ``count`` items of a queue, oldest first."""
    return [sample.data for sample in client.sample(table, count, emit_timesteps=False)]


def size(client: resound.Client, table: str = QUEUE) -> int:
    return client.server_info()[table].current_size


# --- the API's shape


def test_client_writer_and_writer_methods_have_reverbs_signatures() -> None:
    parameters = inspect.signature(resound.Client.writer).parameters
    assert [(p.name, p.default) for p in list(parameters.values())[1:]] == [
        ("max_sequence_length", inspect.Parameter.empty),
        ("delta_encoded", False),
        ("chunk_length", None),
        ("max_in_flight_items", 25),
    ]

    def names(method: Any) -> list[tuple[str, Any]]:
        return [(p.name, p.default) for p in inspect.signature(method).parameters.values()][1:]

    empty = inspect.Parameter.empty
    assert names(resound.Writer.append) == [("data", empty)]
    assert names(resound.Writer.append_sequence) == [("sequence", empty)]
    assert names(resound.Writer.create_item) == [
        ("table", empty),
        ("num_timesteps", empty),
        ("priority", empty),
    ]
    assert names(resound.Writer.flush) == []
    assert names(resound.Writer.close) == [("retry_on_unavailable", True)]
    assert resound.Writer is resound.legacy_writer.Writer


# --- what is written is what is sampled


def test_items_hold_the_last_steps_of_every_column(serve: Any) -> None:
    _, client = serve(queue_table())
    with client.writer(3) as writer:
        assert isinstance(writer, resound.Writer)
        for i in range(3):
            writer.append([i, np.full([2, 2], i, np.float64)])
        writer.create_item(QUEUE, 3, 1.0)
        writer.create_item(QUEUE, 1, 1.0)
    (first, last) = drain(client, 2)
    np.testing.assert_array_equal(first[0], [0, 1, 2])
    assert first[0].dtype == np.int64
    np.testing.assert_array_equal(first[1], np.arange(3)[:, None, None] * np.ones([3, 2, 2]))
    # A one-step item keeps its time axis, as Reverb's legacy items do.
    np.testing.assert_array_equal(last[0], [2])
    assert last[1].shape == (1, 2, 2)


def test_reverbs_writer_walkthrough_with_nested_steps(serve: Any) -> None:
    _, client = serve(queue_table())
    with client.writer(max_sequence_length=2) as writer:
        for step in range(3):
            writer.append({"obs": np.full(3, step, np.float32), "done": step == 2})
        # Only the last two steps are kept: an item of one or two of them.
        writer.create_item(QUEUE, num_timesteps=1, priority=5.0)
        writer.create_item(QUEUE, num_timesteps=2, priority=1.0)
    (one, two) = drain(client, 2)
    # Leaves in nest order: 'done' before 'obs'.
    np.testing.assert_array_equal(one[0], [True])
    np.testing.assert_array_equal(one[1], [[2, 2, 2]])
    np.testing.assert_array_equal(two[0], [False, True])
    np.testing.assert_array_equal(two[1], [[1, 1, 1], [2, 2, 2]])


def test_append_sequence_adds_its_rows_as_steps(serve: Any) -> None:
    _, client = serve(queue_table())
    with client.writer(max_sequence_length=4) as writer:
        writer.append_sequence([np.array([[1, 2, 3], [4, 5, 6]]), np.array([b"a", b"b"])])
        writer.create_item(QUEUE, num_timesteps=1, priority=1.0)
        writer.append([np.array([7, 8, 9]), b"c"])
        writer.create_item(QUEUE, num_timesteps=3, priority=1.0)
        writer.append_sequence([np.zeros([0, 3], np.int64), np.array([], "S1")])  # no steps
        writer.create_item(QUEUE, num_timesteps=2, priority=1.0)
    (one, three, two) = drain(client, 3)
    np.testing.assert_array_equal(one[0], [[4, 5, 6]])
    assert one[1].tolist() == [b"b"]
    np.testing.assert_array_equal(three[0], [[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    assert three[1].tolist() == [b"a", b"b", b"c"]
    np.testing.assert_array_equal(two[0], [[4, 5, 6], [7, 8, 9]])


def test_items_span_chunks_and_survive_the_window_moving(serve: Any) -> None:
    _, client = serve(queue_table())
    with client.writer(5, chunk_length=2) as writer:
        for step in range(12):
            writer.append([np.int32(step), np.full(2, step * 0.5, np.float32)])
            if step >= 4:
                writer.create_item(QUEUE, 5, float(step))
    items = drain(client, 8)
    for start, item in enumerate(items):
        np.testing.assert_array_equal(item[0], np.arange(start, start + 5, dtype=np.int32))
        np.testing.assert_array_equal(item[1][:, 1], np.arange(start, start + 5) * 0.5)


def test_delta_encoded_integers_round_trip(serve: Any) -> None:
    _, client = serve(queue_table())
    rng = np.random.default_rng(3)
    frames = rng.integers(0, 255, size=(6, 4, 4), dtype=np.uint8)
    with client.writer(6, delta_encoded=True, chunk_length=3) as writer:
        for frame in frames:
            writer.append({"frame": frame, "value": np.float64(frame.sum())})
        writer.create_item(QUEUE, 6, 1.0)
    ((frame, value),) = drain(client, 1)
    np.testing.assert_array_equal(frame, frames)
    np.testing.assert_array_equal(value, frames.sum(axis=(1, 2)).astype(np.float64))


def test_items_wait_for_their_chunk_until_it_is_full_or_flushed(serve: Any) -> None:
    server, client = serve(queue_table())
    writer = client.writer(4, chunk_length=2)
    writer.append([1])
    writer.create_item(QUEUE, 1, 1.0)  # its chunk has one step of two
    assert size(client) == 0
    writer.append([2])  # the chunk is full: the item goes
    wait_until(lambda: size(client) == 1, "the first item is in the table")
    writer.append([3])
    writer.create_item(QUEUE, 2, 1.0)
    writer.flush()  # completes the half-full chunk and waits for the item
    assert size(client) == 2
    # The next chunk starts after the flushed one: items still line up.
    writer.append([4])
    writer.append([5])
    writer.create_item(QUEUE, 3, 1.0)
    writer.close()
    assert [item[0].tolist() for item in drain(client, 3)] == [[1], [2, 3], [3, 4, 5]]


def test_close_delivers_what_waits_and_the_context_manager_closes(serve: Any) -> None:
    _, client = serve(queue_table())
    writer = client.writer(10)
    writer.append([np.float32(1)])
    writer.create_item(QUEUE, 1, 1.0)
    writer.close()
    assert size(client) == 1
    with client.writer(10) as scoped:
        scoped.append([np.float32(2)])
        scoped.create_item(QUEUE, 1, 1.0)
    assert size(client) == 2
    with pytest.raises(ValueError, match="close\\(\\) has already been called on Writer."):
        scoped.close()
    writer = client.writer(1)
    writer.append([0])
    writer.create_item(QUEUE, 1, 1.0)
    writer.close(retry_on_unavailable=False)  # the server answers: delivered all the same
    assert size(client) == 3


def test_close_without_retries_gives_up_on_a_stopped_server(serve: Any) -> None:
    server, client = serve(queue_table())
    patient = client.writer(4, chunk_length=2)
    hasty = client.writer(4, chunk_length=2)
    for writer in (patient, hasty):
        writer.append([1])
        writer.create_item(QUEUE, 1, 1.0)  # waits for its chunk
    server.stop()
    hasty.close(retry_on_unavailable=False)
    with pytest.raises((ConnectionError, resound.CancelledError)):
        patient.close()
    # Closed all the same.
    with pytest.raises(RuntimeError, match="Calling method Flush after Close"):
        patient.flush()


def test_a_writer_deleted_unclosed_warns_and_delivers(
    serve: Any, caplog: pytest.LogCaptureFixture
) -> None:
    _, client = serve(queue_table())
    writer = client.writer(5)
    writer.append([np.int64(7)])
    writer.create_item(QUEUE, 1, 1.0)
    with caplog.at_level(logging.WARNING, logger="resound"):
        del writer
        gc.collect()
    assert "Writer-object deleted without calling .close explicitly." in caplog.text
    ((value,),) = drain(client, 1)
    assert value.tolist() == [7]


def test_an_error_in_the_with_block_still_delivers_and_propagates(serve: Any) -> None:
    _, client = serve(queue_table())
    with pytest.raises(KeyError, match="body"), client.writer(2) as writer:
        writer.append([1])
        writer.create_item(QUEUE, 1, 1.0)
        raise KeyError("body")
    assert size(client) == 1


def test_repr_names_the_configuration_and_state(serve: Any) -> None:
    _, client = serve(queue_table())
    writer = client.writer(8, delta_encoded=True, chunk_length=4, max_in_flight_items=None)
    writer.append([1])
    assert repr(writer) == (
        "Writer(chunk_length=4, max_timesteps=8, delta_encoded=True, "
        "max_in_flight_items=1000000, index_within_episode=1, closed=False), closed: False"
    )
    writer.close()
    assert repr(writer).endswith("closed=True), closed: True")


def test_writers_go_to_one_server_each_of_several() -> None:
    servers = [resound.Server([queue_table()]) for _ in range(2)]
    try:
        client = resound.Client([f"127.0.0.1:{server.port}" for server in servers])
        for value in range(4):
            with client.writer(2) as writer:
                writer.append([value, value * 10])
                writer.append([value + 1, value * 10 + 1])
                writer.create_item(QUEUE, 2, 1.0)
        sizes = [server.table(QUEUE).info.current_size for server in servers]
        assert sizes == [2, 2]
        items = sorted(
            item[0].tolist() for server in servers for item in drain(server.in_process_client(), 2)
        )
        assert items == [[value, value + 1] for value in range(4)]
    finally:
        for server in servers:
            server.stop()


def test_many_writers_on_threads_insert_every_item(serve: Any) -> None:
    _, client = serve(queue_table(max_size=1000))

    def write(first: int) -> None:
        for value in range(first, first + 20):
            with client.writer(1) as writer:
                writer.append([value])
                writer.flush()  # a flush before create_item is harmless
                writer.create_item(QUEUE, 1, 1.0)
                writer.flush()

    workers = [Background(write, first) for first in range(0, 160, 20)]
    for worker in workers:
        worker.value()
    assert sorted(item[0].tolist()[0] for item in drain(client, 160)) == list(range(160))


def test_at_most_max_in_flight_items_are_unconfirmed_when_create_item_returns(serve: Any) -> None:
    # Over gRPC the server confirms items asynchronously: a writer without the
    # bound would be far ahead of the table after a burst of items.
    server, client = serve(queue_table(max_size=1000))
    inserted = server.table(QUEUE)
    with client.writer(1, max_in_flight_items=2) as writer:
        for count in range(1, 101):
            writer.append([count])
            writer.create_item(QUEUE, 1, 1.0)
            assert inserted.info.rate_limiter_info.insert_stats.completed >= count - 2
    assert [item[0].tolist() for item in drain(client, 100)] == [[n] for n in range(1, 101)]


def test_items_waiting_for_their_chunk_are_not_in_flight(serve: Any) -> None:
    server, client = serve(queue_table(max_size=1000))
    # Ten items wait for a chunk of ten steps; the bound of one item in
    # flight does not send them early (the chunk would be cut short).
    with client.writer(10, max_in_flight_items=1) as writer:
        for step in range(9):
            writer.append([step])
            writer.create_item(QUEUE, 1, 1.0)
        assert size(client) == 0
        writer.append([9])
        writer.create_item(QUEUE, 10, 1.0)
    items = [item[0].tolist() for item in drain(client, 10)]
    assert items == [[step] for step in range(9)] + [list(range(10))]


# --- arguments and errors


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"max_sequence_length": 0}, "max_sequence_length \\(0\\) must be a positive integer"),
        ({"max_sequence_length": 2.5}, "max_sequence_length"),
        ({"max_sequence_length": True}, "max_sequence_length"),
        ({"max_sequence_length": 2, "chunk_length": 0}, "chunk_length \\(0\\) must be"),
        ({"max_sequence_length": 2, "chunk_length": -1}, "chunk_length"),
        ({"max_sequence_length": 2, "chunk_length": 3}, "<= max_sequence_length \\(2\\)"),
        ({"max_sequence_length": 1, "max_in_flight_items": 0}, "max_in_flight_items \\(0\\)"),
        ({"max_sequence_length": 1, "max_in_flight_items": -1}, "max_in_flight_items"),
    ],
)
def test_writer_arguments_are_checked(serve: Any, arguments: dict, message: str) -> None:
    _, client = serve(queue_table())
    with pytest.raises(ValueError, match=message):
        client.writer(**arguments)


def test_writer_argument_defaults_and_limits_that_are_fine(serve: Any) -> None:
    _, client = serve(queue_table())
    for arguments in (
        {"max_sequence_length": 2, "chunk_length": 1},
        {"max_sequence_length": 2, "chunk_length": 2},
        {"max_sequence_length": 1, "max_in_flight_items": 1},
        {"max_sequence_length": 1, "max_in_flight_items": None},
    ):
        client.writer(**arguments).close()
    assert repr(client.writer(30)).startswith("Writer(chunk_length=10, max_timesteps=30,")
    assert repr(client.writer(4)).startswith("Writer(chunk_length=4, max_timesteps=4,")


def test_methods_after_close_raise_runtime_error(serve: Any) -> None:
    _, client = serve(queue_table())
    writer = client.writer(2)
    writer.append([1])
    writer.close()
    for call, method in (
        (lambda: writer.append([1]), "Append"),
        (lambda: writer.append_sequence([np.ones(2)]), "Append"),
        (lambda: writer.create_item(QUEUE, 1, 1.0), "CreateItem"),
        (writer.flush, "Flush"),
    ):
        with pytest.raises(RuntimeError, match=f"Calling method {method} after Close has been"):
            call()
    with pytest.raises(ValueError, match="Cannot reuse already closed Writer"), writer:
        pass
    assert size(client) == 0


def _check_still_writes(client: resound.Client, writer: resound.Writer, steps: list) -> None:
    """The writer, after refused calls, writes an item of ``steps`` (its
    history is what the accepted calls made it)."""
    writer.create_item(QUEUE, len(steps), 1.0)
    writer.flush()
    ((column, *_),) = drain(client, 1)
    assert column.tolist() == steps


def test_a_refused_append_changes_nothing(serve: Any) -> None:
    _, client = serve(queue_table())
    writer = client.writer(4)
    writer.append([np.float32(1), np.zeros(2, np.int32)])
    refused = [
        ([np.float32(2)], "Number of tensors per timestep was inconsistent. Previously it was 2"),
        ([np.float32(2), np.zeros(3, np.int32)], "index 1 due to mismatched shapes"),
        ([np.float64(2), np.zeros(2, np.int32)], "index 0 due to mismatched dtypes"),
        ([np.float32(2), None], "must not hold None"),
        ([np.float32(2), {1, 2}], "leaf 1 of the flattened data"),
        ([], "empty data"),
    ]
    for step, message in refused:
        with pytest.raises(ValueError, match=message):
            writer.append(step)
    writer.append([np.float32(3), np.ones(2, np.int32)])
    _check_still_writes(client, writer, [1.0, 3.0])
    writer.close()


def test_a_refused_append_sequence_changes_nothing(serve: Any) -> None:
    _, client = serve(queue_table())
    writer = client.writer(4)
    writer.append([np.float32(1), np.zeros(2, np.int32)])
    refused = [
        ([], "AppendSequence called with empty data."),
        ([np.float32(2), np.zeros([1, 2], np.int32)], "scalar tensor at index 0"),
        ([np.ones(2, np.float32), np.zeros([3, 2], np.int32)], "non equal batch dimension"),
        # A bad row type or shape refuses the whole sequence, not its tail.
        ([np.ones(2, np.float32), np.zeros([2, 5], np.int32)], "mismatched shapes"),
        ([np.ones(2, np.float16), np.zeros([2, 2], np.int32)], "mismatched dtypes"),
    ]
    for sequence, message in refused:
        with pytest.raises(ValueError, match=message):
            writer.append_sequence(sequence)
    writer.append_sequence([np.array([4, 5], np.float32), np.zeros([2, 2], np.int32)])
    _check_still_writes(client, writer, [1.0, 4.0, 5.0])
    writer.close()


def test_a_refused_create_item_changes_nothing(serve: Any) -> None:
    _, client = serve(
        queue_table(),
        resound.Table(
            "prio", selectors.Prioritized(1.0), selectors.Fifo(), 10, rate_limiters.MinSize(1)
        ),
    )
    writer = client.writer(3)
    writer.append([np.float32(1)])
    writer.append([np.float32(2)])
    refused = [
        ((QUEUE, 0, 1.0), "num_timesteps \\(0\\) must be a positive integer"),
        ((QUEUE, 1.5, 1.0), "num_timesteps"),
        ((QUEUE, 3, 1.0), "Argument `num_timesteps` is larger than number of buffered"),
        ((QUEUE, 1, float("nan")), "`priority` must not be nan."),
        ((QUEUE, 1, "high"), "priority must be a number"),
        (("missing", 1, 1.0), "Unable to find signatures for table 'missing'.*prio, queue"),
        (("prio", 1, -1.0), "priority must be >= 0"),
    ]
    for arguments, message in refused:
        with pytest.raises(ValueError, match=message):
            writer.create_item(*arguments)
    writer.append([np.float32(3)])
    writer.append([np.float32(4)])
    with pytest.raises(ValueError, match="`num_timesteps` must be <= `max_timesteps`"):
        writer.create_item(QUEUE, 4, 1.0)
    _check_still_writes(client, writer, [2.0, 3.0, 4.0])
    assert size(client, "prio") == 0
    writer.close()


def test_items_are_checked_against_the_table_signature(serve: Any) -> None:
    signature = {"obs": resound.TensorSpec([None, 2], np.float32)}
    step_signature = {"obs": resound.TensorSpec([2], np.float32)}
    _, client = serve(
        queue_table(signature=signature),
        resound.Table.queue("steps", 10, signature=step_signature),
    )
    writer = client.writer(3)
    writer.append({"obs": np.zeros(2, np.float32)})
    writer.append({"obs": np.ones(2, np.float32)})
    writer.create_item(QUEUE, 2, 1.0)  # [2, 2] fits [None, 2]
    writer.create_item("steps", 1, 1.0)  # one step may match the step's shape
    message = (
        "table 'steps': field ('obs',) is float32 [2, 2] but the signature expects float32 [2] "
        "(the item's 2 appended steps, each [2])"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        writer.create_item("steps", 2, 1.0)  # a [2, 2] item does not fit [2]
    other = client.writer(3)
    other.append({"obs": np.zeros(2, np.float64)})
    with pytest.raises(
        ValueError, match=re.escape("is float64 [1, 2] but the signature expects float32")
    ):
        other.create_item(QUEUE, 1, 1.0)
    wide = client.writer(3)
    wide.append({"obs": np.zeros(2, np.float32), "extra": 1})
    with pytest.raises(ValueError, match="called with 2 tensors, but table requires 1"):
        wide.create_item(QUEUE, 1, 1.0)
    for each in (writer, other, wide):
        each.close()
    ((obs,),) = drain(client, 1)
    np.testing.assert_array_equal(obs, [[0, 0], [1, 1]])
    assert size(client, "steps") == 1
