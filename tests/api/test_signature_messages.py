"""Signature mismatches are reported in the user's terms, the same from
every path (insert, TrajectoryWriter, the legacy Writer, StructuredWriter,
the core's own check behind an unvalidated writer, over both transports):
the table, the field's path in the signature, numpy dtype names, shapes."""

from __future__ import annotations

import re

import numpy as np
import pytest

import resound
from resound import _core, structured_writer

MISMATCH = "table 'replay': field ('obs',) is float64 [1, 4] but the signature expects float32 [4]"


def replay(signature: object = None, **kwargs: object) -> resound.Table:
    if signature is None:
        signature = {
            "obs": resound.TensorSpec([4], np.float32),
            "act": resound.TensorSpec([], np.int32),
        }
    return resound.Table.queue("replay", 10, signature=signature, **kwargs)


def step(obs_dtype: type = np.float64) -> dict[str, np.ndarray]:
    return {"obs": np.zeros(4, obs_dtype), "act": np.int32(1)}


def test_insert_names_table_field_and_numpy_dtypes(serve):
    server, client = serve(replay())
    with pytest.raises(ValueError) as raised:
        client.insert(step(), {"replay": 1.0})
    assert str(raised.value) == MISMATCH
    assert server.table("replay").info.current_size == 0


def test_insert_explains_its_time_axis(serve):
    # Given [1, 4] for a [4] field, insert's item is [1, 1, 4]: the time
    # axis insert adds is what the message explains.
    _, client = serve(replay())
    with pytest.raises(ValueError) as raised:
        client.insert({"obs": np.zeros((1, 4), np.float32), "act": np.int32(1)}, {"replay": 1.0})
    message = str(raised.value)
    assert message.startswith(
        "table 'replay': field ('obs',) is float32 [1, 1, 4] but the signature expects float32 [4]"
    )
    assert "insert() adds a time axis of length 1: the value given is [1, 4]" in message


def test_insert_may_match_with_or_without_the_time_axis(serve):
    server, client = serve(replay({"obs": resound.TensorSpec([None, 4], np.float32)}))
    client.insert({"obs": np.zeros(4, np.float32)}, {"replay": 1.0})
    assert server.table("replay").info.current_size == 1


def test_trajectory_writer_create_item(serve):
    _, client = serve(replay())
    with client.trajectory_writer(1) as writer:
        writer.append(step())
        with pytest.raises(ValueError) as raised:
            writer.create_item(
                "replay", 1.0, {"obs": writer.history["obs"][-1:], "act": writer.history["act"][-1]}
            )
    assert str(raised.value) == MISMATCH


def test_unvalidated_writer_gets_the_cores_message(serve):
    # The check runs in the core (on the server over gRPC): the same words.
    server, client = serve(replay())
    writer = client.trajectory_writer(1, validate_items=False)
    writer.append(step())
    with pytest.raises(ValueError) as raised:
        writer.create_item(
            "replay", 1.0, {"obs": writer.history["obs"][-1:], "act": writer.history["act"][-1]}
        )
        writer.flush()
    message = str(raised.value)
    assert MISMATCH in message, message
    assert not re.search(r"<f[48]|\bInsert\b|column \d", message), message
    assert server.table("replay").info.current_size == 0


def test_legacy_writer(serve):
    _, client = serve(replay())
    with client.writer(1) as writer:
        writer.append(step())
        with pytest.raises(ValueError) as raised:
            writer.create_item("replay", 1, 1.0)
    assert str(raised.value).startswith(MISMATCH + " (the item's 1 appended steps, each [4])")


def test_structured_writer(serve):
    _, client = serve(replay())
    config = structured_writer.create_config(
        {
            "obs": structured_writer.pattern_from_transform(step(), lambda s: s["obs"][-1:]),
            "act": structured_writer.pattern_from_transform(step(), lambda s: s["act"][-1]),
        },
        "replay",
    )
    writer = client.structured_writer([config])
    # In process the table refuses the item at once; over gRPC at flush.
    with pytest.raises(ValueError) as raised:
        writer.append(step())
        writer.flush()
    assert MISMATCH in str(raised.value)
    assert str(raised.value).startswith(("table", "StructuredWriter.")), str(raised.value)


def test_nested_and_flat_signatures_are_named_by_path_or_name(serve):
    _, client = serve(
        replay({"obs": {"pixels": resound.TensorSpec([2], np.uint8)}}),
    )
    with pytest.raises(ValueError, match=re.escape("field ('obs', 'pixels') is int64 [1, 2]")):
        client.insert({"obs": {"pixels": np.zeros(2, np.int64)}}, {"replay": 1.0})
    _, client = serve(
        resound.Table.queue("flat", 10, signature=resound.TensorSpec([], bool, "done"))
    )
    message = "table 'flat': field 'done' is int8 [1] but the signature expects bool []"
    with pytest.raises(ValueError, match=re.escape(message)):
        client.insert(np.int8(1), {"flat": 1.0})


def test_core_labels_its_columns_and_falls_back_to_indices(store, chunk_factory):
    def table(specs: list) -> _core.Table:
        return _core.Table(
            "t",
            _core.make_selector("fifo"),
            _core.make_selector("fifo"),
            10,
            _core.RateLimiter.min_size(1),
            chunk_store=store,
            column_specs=specs,
        )

    chunk = chunk_factory(num_steps=1, shape=(3,), dtype="<f8")
    item = [([(chunk.key, 0, 1)], False)]
    with pytest.raises(ValueError) as raised:
        table([("<i4", (3,), "field ('x',)")]).insert(1, 1.0, item)
    assert str(raised.value) == (
        "table 't': field ('x',) is float64 [1, 3] but the signature expects int32 [3]"
    )
    with pytest.raises(ValueError) as raised:
        table([("<f8", (2, 3))]).insert(1, 1.0, item)
    assert str(raised.value) == (
        "table 't': column 0 is float64 [1, 3] but the signature expects float64 [2, 3] "
        "(a one-step item, as insert() writes, has a time axis of length 1: its value is [3])"
    )
    assert table([("<f8", (3,), "x")]).column_specs == [("<f8", (3,))]


def test_sample_batch_of_insert_and_writer_items_says_why_shapes_differ(serve):
    # A [4] field takes both insert()'s [1, 4] item and a writer's item over
    # one squeezed step ([4]); one batch cannot stack the two.
    _, client = serve(replay({"obs": resound.TensorSpec([4], np.float32)}))
    client.insert({"obs": np.zeros(4, np.float32)}, {"replay": 1.0})
    with client.trajectory_writer(1) as writer:
        writer.append({"obs": np.ones(4, np.float32)})
        writer.create_item("replay", 1.0, {"obs": writer.history["obs"][-1]})
    with pytest.raises(ValueError) as raised:
        client.sample_batch("replay", 2)
    message = str(raised.value)
    assert message.startswith(
        "sample_batch from table 'replay': field ('obs',) has different shapes across the "
        "batch: [1, 4] (1 item), [4] (1 item); insert() adds a time axis of length 1"
    ), message


def test_sample_batch_of_items_of_different_lengths(serve):
    _, client = serve(replay({"obs": resound.TensorSpec([None], np.float32)}))
    with client.trajectory_writer(2) as writer:
        for length in (1, 2):
            writer.append({"obs": np.float32(0)})
            writer.create_item("replay", 1.0, {"obs": writer.history["obs"][-length:]})
    with pytest.raises(ValueError) as raised:
        client.sample_batch("replay", 2)
    assert "field ('obs',) has different shapes across the batch: [1] (1 item), [2] (1 item)" in (
        str(raised.value)
    )
    assert "different numbers of steps" in str(raised.value)
