"""Strings come back as ``bytes``, as Reverb returns them: ``'hello'`` in,
``b'hello'`` out. TensorFlow string tensors become numpy object arrays of
``bytes``, so samples hold object arrays whose elements are ``bytes``; ``str``
is stored as its UTF-8 encoding. The same for every writer, every way of
sampling, both transports and checkpoints."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import resound
from resound import checkpointers, rate_limiters, selectors
from resound import structured_writer as sw

from helpers.waiting import SAFETY

# What goes in, and the bytes that must come out (one step).
VALUES: list[tuple[Any, Any]] = [
    ("hello", b"hello"),
    (b"raw\xffbytes", b"raw\xffbytes"),
    ("héllo wörld ✓", "héllo wörld ✓".encode()),
    (np.array(["x", "yz"]), [b"x", b"yz"]),
    (np.array([b"p", b"qr"]), [b"p", b"qr"]),
    (np.array(["ü", "a"], dtype=object), ["ü".encode(), b"a"]),
]
IDS = ["str", "bytes", "non_ascii", "U_array", "S_array", "object_array"]


def fifo_table(signature: Any = None) -> resound.Table:
    """Items come out in order, each once."""
    return resound.Table(
        "t",
        selectors.Fifo(),
        selectors.Fifo(),
        100,
        rate_limiters.MinSize(1),
        max_times_sampled=1,
        signature=signature,
    )


def assert_bytes(array: np.ndarray, expected: Any) -> None:
    """``array`` is an object array of ``bytes`` equal to ``expected``."""
    assert isinstance(array, np.ndarray) and array.dtype == object, repr(array)
    assert array.tolist() == expected
    for element in np.asarray(array).flat:
        assert type(element) is bytes


@pytest.mark.parametrize(("value", "expected"), VALUES, ids=IDS)
def test_insert_then_sample_gives_bytes(serve, value, expected):
    _, client = serve(fifo_table())
    for _ in range(2):
        client.insert(value, priorities={"t": 1.0})
    (timesteps,) = client.sample("t", 1)
    assert_bytes(timesteps[0].data[0], expected)  # one step, as Reverb: np.asarray(col[i])
    (sample,) = client.sample("t", 1, emit_timesteps=False)
    assert_bytes(sample.data[0], [expected])


@pytest.mark.parametrize(("value", "expected"), VALUES, ids=IDS)
def test_trajectory_writer_items_sample_as_bytes(serve, value, expected):
    _, client = serve(fifo_table())
    with client.trajectory_writer(3) as writer:
        for _ in range(3):
            writer.append({"s": value, "z": np.int32(1)})
        writer.create_item("t", 1.0, {"s": writer.history["s"][-3:], "z": writer.history["z"][-1]})
        writer.flush(timeout_ms=int(SAFETY * 1000))
    (sample,) = client.sample("t", 1, emit_timesteps=False)
    assert_bytes(sample.data[0], [expected] * 3)
    assert sample.data[1].dtype == np.int32  # other columns are untouched


def test_a_list_of_str_is_a_structure_of_string_columns(serve):
    # As in Reverb, a list in the data is a structure: one column per str.
    _, client = serve(fifo_table())
    client.insert(["a", "bc", "déf"], priorities={"t": 1.0})
    (sample,) = client.sample("t", 1, emit_timesteps=False)
    assert len(sample.data) == 3
    for column, expected in zip(sample.data, [b"a", b"bc", "déf".encode()], strict=True):
        assert_bytes(column, [expected])


def test_a_column_takes_str_and_bytes_alike(serve):
    _, client = serve(fifo_table())
    with client.trajectory_writer(3) as writer:
        for value in ("one", b"two", np.array("thrée")):
            writer.append([value])
        writer.create_item("t", 1.0, [writer.history[0][-3:]])
        writer.flush(timeout_ms=int(SAFETY * 1000))
    (sample,) = client.sample("t", 1, emit_timesteps=False)
    assert_bytes(sample.data[0], [b"one", b"two", "thrée".encode()])


def test_sample_batch_and_sample_batches_stack_strings_as_bytes(serve):
    _, client = serve(fifo_table())
    words = ["a", "longer", "wörd", "z"]
    for word in words:
        client.insert([word, np.float32(len(word))], priorities={"t": 1.0})
    batch = client.sample_batch("t", 2, timeout=SAFETY)
    assert_bytes(batch.data[0], [[b"a"], [b"longer"]])
    with client.sample_batches("t", 2, num_batches=1, timeout=SAFETY) as batches:
        (second,) = list(batches)
    assert_bytes(second.data[0], [["wörd".encode()], [b"z"]])
    assert second.data[1].dtype == np.float32


def test_structured_writer_strings_sample_as_bytes(serve):
    _, client = serve(fifo_table())
    pattern = sw.pattern_from_transform({"s": None}, lambda step: step["s"][-2:])
    with client.structured_writer([sw.create_config(pattern, "t")]) as writer:
        for value in ("first", "sécond"):
            writer.append({"s": value})
        writer.flush()
    (sample,) = client.sample("t", 1, emit_timesteps=False)
    assert_bytes(sample.data[0], [b"first", "sécond".encode()])


def test_a_str_signature_accepts_str_and_bytes(serve):
    signature = {"s": resound.TensorSpec([], str), "b": resound.TensorSpec([], bytes)}
    _, client = serve(fifo_table(signature))
    client.insert({"s": "text", "b": b"raw"}, priorities={"t": 1.0})
    client.insert({"s": b"raw", "b": "text"}, priorities={"t": 1.0})
    samples = list(client.sample("t", 2, emit_timesteps=False, unpack_as_table_signature=True))
    assert [s.data["s"].tolist() for s in samples] == [[b"text"], [b"raw"]]
    assert [s.data["b"].tolist() for s in samples] == [[b"raw"], [b"text"]]
    with pytest.raises(ValueError):
        client.insert({"s": np.float32(1.0), "b": b"x"}, priorities={"t": 1.0})


def test_strings_survive_a_checkpoint_as_bytes(tmp_path):
    def tables() -> list[resound.Table]:
        return [fifo_table()]

    checkpointer = checkpointers.DefaultCheckpointer(str(tmp_path))
    with resound.Server(tables(), checkpointer=checkpointer) as server:
        client = resound.Client(f"127.0.0.1:{server.port}", transport="grpc")
        client.insert(["héllo", b"\x00\x01raw"], priorities={"t": 1.0})
        client.checkpoint()
    restored = resound.Server(tables(), listen=False, checkpointer=checkpointer)
    try:
        (sample,) = restored.in_process_client().sample("t", 1, emit_timesteps=False)
        assert_bytes(sample.data[0], ["héllo".encode()])
        assert_bytes(sample.data[1], [b"\x00\x01raw"])
    finally:
        restored.stop()


def test_str_is_stored_as_utf8_bytes(serve):
    server, client = serve(fifo_table())
    client.insert("naïve", priorities={"t": 1.0})
    (stored,) = server.table("t")._core.snapshot()
    (chunk,) = stored.chunks
    assert chunk.dtype == "|S6"  # UTF-8 (6 bytes), not 4 bytes a character ('<U5')
    (sample,) = client.sample("t", 1, emit_timesteps=False)
    assert sample.data[0].tolist()[0].decode("utf-8") == "naïve"
