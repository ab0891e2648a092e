"""TrajectoryWriter through embedded servers (docs/semantics.md §5.1-§5.8;
docs/compatibility.md items 7, 9, 10 and 16): append and history, columns
and references, create_item validation, flush and end_episode (with rate
limited tables and timeouts), close, configure, compression and round trips of
every kind of data."""

from __future__ import annotations

import collections
import gc
import re
import signal
import subprocess
import sys
import threading
import time
import weakref
from typing import Any

import numpy as np
import pytest

import resound
from resound import TensorSpec, TrajectoryColumn, _codec, rate_limiters, selectors

from helpers.transports import in_process_only
from helpers.waiting import SAFETY, Background, wait_until

Step = collections.namedtuple("Step", ["obs", "action"])


# --- helpers


def queue(name: str = "q", max_size: int = 1000, signature: Any = None) -> resound.Table:
    """Items come out once each, in insertion order."""
    return resound.Table.queue(name, max_size, signature=signature)


def uniform(name: str = "u", max_size: int = 100_000) -> resound.Table:
    return resound.Table(
        name, selectors.Uniform(), selectors.Fifo(), max_size, rate_limiters.MinSize(1)
    )


def prioritized(name: str = "p") -> resound.Table:
    return resound.Table(
        name, selectors.Prioritized(1.0), selectors.Fifo(), 100, rate_limiters.MinSize(1)
    )


def take(client: resound.Client, table: str, n: int = 1) -> list[Any]:
    """The data of the next n samples (bounded wait: a missing item fails)."""
    samples = client.sample(table, n, emit_timesteps=False, timeout=SAFETY)
    return [sample.data for sample in samples]


def size(server: resound.Server, table: str = "q") -> int:
    return server.table(table).info.current_size


def items(server: resound.Server, table: str = "q") -> list[Any]:
    """The table's items (trajectory and chunks) without sampling them."""
    return sorted(server.table(table)._core.snapshot(), key=lambda item: item.inserted_at)


def fill_queue(writer: resound.TrajectoryWriter, count: int, table: str = "q") -> None:
    """Appends `count` steps x=0.. and creates one item per step."""
    for i in range(count):
        writer.append({"x": np.float32(i)})
        writer.create_item(table, 1.0, {"x": writer.history["x"][-1]})


# --- append


def test_append_returns_refs_shaped_like_the_data(serve):
    _, client = serve(queue())
    writer = client.trajectory_writer(2)
    refs = writer.append({"a": 1, "b": [np.zeros(3, np.float32), None], "c": (True,)})
    assert set(refs) == {"a", "b", "c"}
    assert isinstance(refs["a"], resound.CellRef)
    assert isinstance(refs["b"], list) and len(refs["b"]) == 2
    assert refs["b"][1] is None
    assert isinstance(refs["c"], tuple)
    assert refs["a"].numpy() == 1
    np.testing.assert_array_equal(refs["b"][0].numpy(), np.zeros(3, np.float32))
    assert refs["c"][0].numpy() == np.True_


def test_python_scalars_map_to_int64_float64_and_bool(serve):
    _, client = serve(queue())
    writer = client.trajectory_writer(1)
    refs = writer.append({"i": 3, "f": 0.5, "b": False, "s": "text", "y": b"raw"})
    assert refs["i"].dtype == np.int64
    assert refs["f"].dtype == np.float64
    assert refs["b"].dtype == np.bool_
    assert refs["s"].dtype.kind == "S"  # str is stored as UTF-8 bytes
    assert refs["y"].dtype.kind == "S"
    assert tuple(refs["i"].shape) == ()


def test_history_before_the_first_append_raises(serve):
    _, client = serve(queue())
    writer = client.trajectory_writer(2)
    with pytest.raises(RuntimeError, match="history cannot be accessed before `append`"):
        _ = writer.history


def test_new_fields_extend_the_structure_and_read_none_before(serve):
    server, client = serve(queue())
    writer = client.trajectory_writer(5)
    writer.append({"a": 1})
    writer.append({"a": 2, "b": {"c": 1.5}})
    history = writer.history
    assert set(history) == {"a", "b"} and set(history["b"]) == {"c"}
    assert len(history["a"]) == len(history["b"]["c"]) == 2
    with pytest.raises(ValueError, match="cannot contain any None"):
        history["b"]["c"][0]
    with pytest.raises(ValueError, match="cannot contain any None"):
        history["b"]["c"][:]
    assert history["b"]["c"][1].numpy() == 1.5
    writer.create_item("q", 1.0, {"a": history["a"][:], "c": history["b"]["c"][-1:]})
    writer.flush()
    a, c = take(client, "q")[0]
    np.testing.assert_array_equal(a, [1, 2])
    np.testing.assert_array_equal(c, [1.5])


@pytest.mark.parametrize("index", [slice(-4, None), 0, [0, 4]])
def test_steps_older_than_the_keep_alive_window_are_refused_naming_the_setting(serve, index):
    _, client = serve(queue())
    writer = client.trajectory_writer(2)
    for step in range(5):
        writer.append({"obs": np.float32(step)})
    with pytest.raises(ValueError, match=r"older than the last 2 steps .*num_keep_alive_refs=2"):
        writer.history["obs"][index]
    writer.append({"obs": None})
    with pytest.raises(ValueError, match="cannot contain any None") as missing:
        writer.history["obs"][-1]  # no value at that step: not a keep-alive matter
    assert "num_keep_alive_refs" not in str(missing.value)


def test_sequences_grow_like_dicts(serve):
    _, client = serve(queue())
    writer = client.trajectory_writer(3)
    writer.append([1])
    writer.append([2, 20.0])
    assert len(writer.history) == 2
    assert writer.history[1][-1].numpy() == 20.0
    with pytest.raises(ValueError, match="cannot contain any None"):
        writer.history[1][0]


def test_fields_that_were_only_ever_none_read_none(serve):
    _, client = serve(queue())
    writer = client.trajectory_writer(4)
    writer.append({"x": 1, "y": None})
    writer.append({"x": 2})
    assert len(writer.history["y"]) == 2
    with pytest.raises(ValueError, match="cannot contain any None"):
        writer.history["y"][-1]
    for index in (slice(-2, None), [0, 1], 0):  # slices too (they raised AttributeError)
        with pytest.raises(ValueError, match="cannot contain any None") as raised:
            writer.history["y"][index]
        assert "num_keep_alive_refs" not in str(raised.value)
    writer.append({"x": 3, "y": 3.0})
    assert writer.history["y"][-1].numpy() == 3.0
    with pytest.raises(ValueError, match="cannot contain any None"):
        writer.history["y"][-2:]
    # A None-only field first seen after the first step is in history too.
    writer.append({"x": 4, "z": None})
    assert len(writer.history["z"]) == 4


def test_omitted_and_none_fields_read_none_in_that_step(serve):
    _, client = serve(queue())
    writer = client.trajectory_writer(4)
    writer.append({"a": 1, "b": 10})
    writer.append({"a": 2})
    writer.append({"a": 3, "b": None})
    assert len(writer.history["b"]) == 3
    assert writer.history["b"][0].numpy() == 10
    for position in (1, 2):
        with pytest.raises(ValueError, match="cannot contain any None"):
            writer.history["b"][position]


@pytest.mark.parametrize(
    "first, second, got, expected",
    [
        (1, np.int32(1), "int32", "int64"),
        (1.0, np.float32(1), "float32", "float64"),
        (np.float32(1), 1, "int64", "float32"),
        (True, 1, "int64", "bool"),
        ("text", 1, "int64", "bytes"),  # str is stored as UTF-8 bytes
    ],
)
def test_dtype_change_raises(serve, first, second, got, expected):
    _, client = serve(queue())
    writer = client.trajectory_writer(2)
    writer.append({"x": first})
    message = (
        f"Tensor of wrong dtype provided for column ('x',). Got {got} but expected {expected}."
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        writer.append({"x": second})


def test_dtype_error_names_the_nested_path(serve):
    _, client = serve(queue())
    writer = client.trajectory_writer(2)
    writer.append({"nest": {"sub": np.zeros(2, np.float32)}})
    with pytest.raises(ValueError, match=re.escape("column ('nest', 'sub'). Got float64")):
        writer.append({"nest": {"sub": np.zeros(2)}})


@pytest.mark.parametrize("chunk_length", [1, 3])
def test_either_byte_order_fits_a_column(serve, chunk_length):
    _, client = serve(queue())
    writer = client.trajectory_writer(3, max_chunk_length=chunk_length)
    writer.append({"f": np.arange(3, dtype=">f4"), "i": np.arange(2, dtype="<i8")})
    writer.append({"f": np.arange(3, dtype="<f4") + 1, "i": np.arange(2, dtype=">i8") + 1})
    writer.append({"f": np.arange(3, dtype=">f4") + 2, "i": np.arange(2, dtype="<i8") + 2})
    writer.create_item("q", 1.0, {"f": writer.history["f"][:], "i": writer.history["i"][:]})
    writer.flush()
    f, i = take(client, "q")[0]
    np.testing.assert_array_equal(f, [[0, 1, 2], [1, 2, 3], [2, 3, 4]])
    np.testing.assert_array_equal(i, [[0, 1], [1, 2], [2, 3]])
    assert f.dtype.newbyteorder("=") == np.float32 and i.dtype.newbyteorder("=") == np.int64
    with pytest.raises(ValueError, match="Got float64 but expected float32"):
        writer.append({"f": np.arange(3, dtype=">f8")})


def test_strings_of_any_length_fit_a_string_column(serve):
    _, client = serve(queue())
    writer = client.trajectory_writer(3, max_chunk_length=3)
    for text in ("a", "longer text", ""):
        writer.append({"s": text})
    np.testing.assert_array_equal(writer.history["s"][:].numpy(), [b"a", b"longer text", b""])


@pytest.mark.parametrize(
    "first, second, got, expected",
    [
        (np.zeros(2), np.zeros(3), "[3]", "[2]"),
        (np.zeros(2), np.zeros((1, 2)), "[1, 2]", "[2]"),
        (1.0, np.zeros(1), "[1]", "[]"),
        (np.zeros((2, 3)), np.zeros((3, 2)), "[3, 2]", "[2, 3]"),
    ],
)
def test_shape_change_raises(serve, first, second, got, expected):
    _, client = serve(queue())
    writer = client.trajectory_writer(2)
    writer.append({"x": first})
    message = (
        f"Tensor of incompatible shape provided for column ('x',). Got {got} which is "
        f"incompatible with {expected}."
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        writer.append({"x": second})


def writer_state(writer: resound.TrajectoryWriter) -> Any:
    """What a rejected append must leave as it was: the fields, the values in
    their history (None where none) and the episode's step count."""
    history = {
        path: [history_or_none(column, i) for i in range(len(column))]
        for path, column in resound.nest.flatten_with_path(writer.history)
    }
    values = {
        path: [None if entry is None else entry.numpy().tolist() for entry in entries]
        for path, entries in history.items()
    }
    return values, writer.episode_steps


def history_or_none(column: Any, position: int) -> Any:
    try:
        return column[position]
    except ValueError:  # a None entry
        return None


@pytest.mark.parametrize("nested", [False, True], ids=["flat-dict", "nested"])
@pytest.mark.parametrize(
    "bad, error",
    [
        (2.5, "Tensor of wrong dtype provided for column"),
        (np.zeros(3, np.int64), "Tensor of incompatible shape provided for column"),
        ({1, 2}, "unsupported object data"),
    ],
    ids=["dtype", "shape", "unsupported"],
)
def test_a_rejected_append_leaves_no_trace(serve, nested, bad, error):
    # Fields in flattening order: a, b. The value for b is rejected; a comes
    # first, so a writer that adds values as it checks them would keep it.
    server, client = serve(queue())
    writer = client.trajectory_writer(4, max_chunk_length=3)

    def step(a: Any, b: Any) -> Any:
        return {"a": a, "n": {"b": b}} if nested else {"a": a, "b": b}

    def column(name: str) -> Any:
        return writer.history["n"]["b"] if nested and name == "b" else writer.history[name]

    writer.append(step(0, 0))
    writer.append(step(1, 1))
    before = [len(column("a")), len(column("b")), writer.episode_steps]
    for _ in range(2):  # failing again changes nothing either
        with pytest.raises(ValueError, match=error):
            writer.append(step(2, bad))
        assert [len(column("a")), len(column("b")), writer.episode_steps] == before
    assert column("a")[-1].numpy() == 1 and column("b")[-1].numpy() == 1
    writer.append(step(2, 2))  # the same step, fixed
    writer.append(step(3, 3))
    assert writer.episode_steps == 4
    assert len(column("a")) == len(column("b")) == 4
    writer.create_item("q", 1.0, {"a": column("a")[:], "b": column("b")[:]})
    writer.flush()
    # The chunkers saw no rejected row: steps 0-2 fill one chunk of 3 rows.
    (item,) = items(server)
    spans = sorted({(c.start_step, c.end_step, c.num_steps) for c in item.chunks})
    assert spans == [(0, 2, 3), (3, 3, 1)]
    a, b = take(client, "q")[0]
    np.testing.assert_array_equal(a, [0, 1, 2, 3])
    np.testing.assert_array_equal(b, [0, 1, 2, 3])


def test_a_rejected_append_into_an_open_step_keeps_the_step_as_it_was(serve):
    _, client = serve(queue())
    writer = client.trajectory_writer(4)
    writer.append({"a": 1, "b": 2, "c": 3})
    writer.append({"a": 4, "b": None, "c": None}, partial_step=True)
    state = writer_state(writer)
    with pytest.raises(ValueError, match="wrong dtype"):
        writer.append({"a": None, "b": 5, "c": 1.5}, partial_step=True)
    with pytest.raises(ValueError, match="has already been set in the active step"):
        writer.append({"a": 7, "b": 5, "c": 6})  # b and c come after a
    assert writer_state(writer) == state
    assert state[0][("b",)] == [2, None]
    writer.append({"a": None, "b": 5, "c": 6})  # completes the step
    assert writer.episode_steps == 2
    np.testing.assert_array_equal(writer.history["a"][:].numpy(), [1, 4])
    np.testing.assert_array_equal(writer.history["b"][:].numpy(), [2, 5])
    np.testing.assert_array_equal(writer.history["c"][:].numpy(), [3, 6])


def test_a_rejected_first_value_can_be_retried_as_is(serve):
    _, client = serve(queue())
    writer = client.trajectory_writer(4)
    writer.append({"x": 0})
    with pytest.raises(ValueError, match="wrong dtype"):
        writer.append({"x": 1.5})
    writer.append({"x": 1})
    writer.append({"x": 2})
    assert writer.episode_steps == 3
    np.testing.assert_array_equal(writer.history["x"][:].numpy(), [0, 1, 2])


@pytest.mark.parametrize(
    "bad_step, error",
    [
        ({"a": 5, "b": np.float32(1), "c": None}, "wrong dtype"),
        ({"a": 5, "b": 1, "c": np.datetime64("2020-01-01")}, "unsupported kind"),
    ],
    ids=["wrong-dtype", "unsupported-dtype"],
)
def test_a_rejected_append_adds_no_new_field(serve, bad_step, error):
    # Flattening order: a (new, acceptable), b, c; b or c is rejected.
    _, client = serve(queue())
    writer = client.trajectory_writer(4)
    writer.append({"b": 1})
    state = writer_state(writer)
    with pytest.raises(ValueError, match=error):
        writer.append(bad_step)
    assert writer_state(writer) == state
    assert set(writer.history) == {"b"}
    writer.append({"b": 2})
    assert set(writer.history) == {"b"}
    writer.append({"a": np.float32(5), "b": 3})
    assert set(writer.history) == {"a", "b"}
    assert [history_or_none(writer.history["a"], i) for i in range(2)] == [None, None]
    assert writer.history["a"][-1].numpy() == 5
    np.testing.assert_array_equal(writer.history["b"][:].numpy(), [1, 2, 3])


def test_a_rejected_first_append_leaves_an_empty_writer(serve):
    _, client = serve(queue())
    writer = client.trajectory_writer(2)
    with pytest.raises(ValueError, match="unsupported object data"):
        writer.append({"a": 1, "b": object()})
    with pytest.raises(RuntimeError, match="history cannot be accessed before"):
        _ = writer.history
    writer.append({"a": 1.0, "b": 2})
    assert writer.history["a"][-1].numpy().dtype == np.float64


def test_partial_steps_fill_one_step(serve):
    server, client = serve(queue())
    writer = client.trajectory_writer(4)
    first = writer.append({"obs": 1.0}, partial_step=True)
    assert writer.episode_steps == 0
    assert len(writer.history["obs"]) == 1
    second = writer.append({"action": 7})
    assert writer.episode_steps == 1
    assert len(writer.history["obs"]) == len(writer.history["action"]) == 1
    assert set(first) == {"obs"} and set(second) == {"action"}
    writer.append({"obs": 2.0}, partial_step=True)
    writer.append({"obs": None, "action": 8}, partial_step=True)
    assert writer.episode_steps == 1
    writer.append({})
    assert writer.episode_steps == 2
    writer.create_item(
        "q", 1.0, {"obs": writer.history["obs"][:], "action": writer.history["action"][:]}
    )
    writer.flush()
    action, obs = take(client, "q")[0]
    np.testing.assert_array_equal(obs, [1.0, 2.0])
    np.testing.assert_array_equal(action, [7, 8])


def test_partial_steps_record_the_episode_step_of_the_step(serve):
    server, client = serve(uniform())
    writer = client.trajectory_writer(4, max_chunk_length=1)
    for step in range(3):
        writer.append({"obs": float(step)}, partial_step=True)
        writer.append({"action": step})
    writer.create_item(
        "u", 1.0, {"obs": writer.history["obs"][-1], "action": writer.history["action"][-1]}
    )
    writer.flush()
    (item,) = items(server, "u")
    assert [(chunk.start_step, chunk.end_step) for chunk in item.chunks] == [(2, 2), (2, 2)]


def test_setting_a_field_twice_in_the_open_step_raises(serve):
    _, client = serve(queue())
    writer = client.trajectory_writer(2)
    writer.append({"a": 1, "b": 2}, partial_step=True)
    message = (
        "Field ('a',) has already been set in the active step by previous (partial) append "
        "call and thus must be omitted or set to None but got: 3"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        writer.append({"a": 3})
    writer.append({"a": None, "c": 4})
    assert writer.episode_steps == 1
    assert writer.history["a"][-1].numpy() == 1
    assert writer.history["c"][-1].numpy() == 4


def test_episode_steps_count_full_appends_only(serve):
    _, client = serve(queue())
    writer = client.trajectory_writer(2)
    assert writer.episode_steps == 0
    for count in range(1, 4):
        writer.append({"x": count})
        assert writer.episode_steps == count
    writer.append({"x": 9}, partial_step=True)
    assert writer.episode_steps == 3
    writer.append({"y": 9})
    assert writer.episode_steps == 4
    writer.end_episode()
    assert writer.episode_steps == 0
    writer.append({"x": 1})
    assert writer.episode_steps == 1


def test_append_copies_the_data(serve):
    for chunk_length in (1, 3):
        _, client = serve(queue(f"q{chunk_length}"))
        writer = client.trajectory_writer(3, max_chunk_length=chunk_length)
        source = np.zeros(3, np.float32)
        ref = writer.append({"x": source})["x"]
        source[:] = 7
        value = ref.numpy()
        value[:] = 9  # numpy() returns a copy too
        np.testing.assert_array_equal(ref.numpy(), np.zeros(3))
        writer.append({"x": source})
        writer.append({"x": source})  # completes the chunk of length 3
        np.testing.assert_array_equal(ref.numpy(), np.zeros(3))
        writer.create_item(f"q{chunk_length}", 1.0, {"x": writer.history["x"][0]})
        writer.flush()
        np.testing.assert_array_equal(take(client, f"q{chunk_length}")[0][0], np.zeros(3))


def test_unsupported_values_are_rejected(serve):
    _, client = serve(queue())
    writer = client.trajectory_writer(2)
    unsupported = (
        np.array([1.0, None], dtype=object),
        np.array(["a", 1], dtype=object),
        {1, 2},
        object(),
        None.__class__,
    )
    for value in unsupported:
        with pytest.raises(ValueError, match="unsupported object data"):
            writer.append({"x": value})
    assert writer.episode_steps == 0
    # A numeric column refuses object arrays too.
    writer.append({"n": 1})
    with pytest.raises(ValueError, match="unsupported object data"):
        writer.append({"n": np.array(2, dtype=object)})


# --- history indexing


def test_history_indexing(serve):
    _, client = serve(queue())
    writer = client.trajectory_writer(10, max_chunk_length=4)
    for i in range(6):
        writer.append({"x": np.int64(i)})
    column = writer.history["x"]
    assert len(column) == 6
    assert column[2].numpy() == 2
    assert column[np.int64(3)].numpy() == 3
    assert column[-1].numpy() == 5
    assert column[-6].numpy() == 0
    np.testing.assert_array_equal(column[1:4].numpy(), [1, 2, 3])
    np.testing.assert_array_equal(column[-2:].numpy(), [4, 5])
    np.testing.assert_array_equal(column[::2].numpy(), [0, 2, 4])
    np.testing.assert_array_equal(column[::-1].numpy(), [5, 4, 3, 2, 1, 0])
    np.testing.assert_array_equal(column[[1, 0]].numpy(), [1, 0])
    np.testing.assert_array_equal(column[[3, 3, -1, 0]].numpy(), [3, 3, 5, 0])
    np.testing.assert_array_equal(column[np.array([2, 4])].numpy(), [2, 4])
    assert column[2].is_squeezed and not column[2:3].is_squeezed
    assert not column[[2]].is_squeezed
    for index in (6, -7):
        with pytest.raises(IndexError):
            column[index]
    for index in (1.0, "1", None, True, {1}):
        with pytest.raises(TypeError):
            column[index]


@pytest.mark.parametrize(
    "positions",
    [[1, 0], [0, 2], [2, 1, 0], [0, 0, 1], [3, 2, 1, 0], [1, 2, 0, 3], [0, 1, 3]],
    ids=lambda p: "-".join(map(str, p)),
)
def test_out_of_order_rows_of_one_chunk_are_written_as_given(serve, positions):
    # docs/compatibility.md item 7: Reverb merged these into one slice from
    # the first offset.
    _, client = serve(queue())
    writer = client.trajectory_writer(4, max_chunk_length=4)
    for i in range(4):
        writer.append({"x": np.int64(10 + i), "y": np.float32(i)})
    writer.create_item(
        "q", 1.0, {"x": writer.history["x"][positions], "y": writer.history["y"][positions]}
    )
    writer.flush()
    x, y = take(client, "q")[0]
    np.testing.assert_array_equal(x, [10 + p for p in positions])
    np.testing.assert_array_equal(y, np.array(positions, np.float32))


def test_out_of_order_rows_across_chunks_are_written_as_given(serve):
    _, client = serve(queue())
    writer = client.trajectory_writer(9, max_chunk_length=3)
    for i in range(9):
        writer.append({"x": i})
    positions = [8, 0, 1, 2, 3, 7, 6, 5, 5, 4]
    writer.create_item("q", 1.0, writer.history["x"][positions])
    writer.create_item("q", 1.0, writer.history["x"][::-1])
    writer.flush()
    first, second = take(client, "q", 2)
    np.testing.assert_array_equal(first[0], positions)
    np.testing.assert_array_equal(second[0], list(range(8, -1, -1)))


def test_history_beyond_keep_alive_reads_none(serve):
    _, client = serve(queue())
    writer = client.trajectory_writer(2)
    for i in range(5):
        writer.append({"x": i})
    column = writer.history["x"]
    assert len(column) == 5
    np.testing.assert_array_equal(column[-2:].numpy(), [3, 4])
    for index in (0, 2, -3):
        with pytest.raises(ValueError, match=r"cannot contain any None.*\('x',\)"):
            column[index]
    with pytest.raises(ValueError, match="cannot contain any None"):
        column[-3:]
    with pytest.raises(ValueError, match="cannot contain any None"):
        column[[4, 1]]


def test_history_of_a_late_column_pads_with_none(serve):
    _, client = serve(queue())
    writer = client.trajectory_writer(3)
    for i in range(5):
        writer.append({"x": i})
    writer.append({"x": 5, "y": 50})
    assert len(writer.history["y"]) == len(writer.history["x"]) == 6
    assert writer.history["y"][5].numpy() == 50
    with pytest.raises(ValueError, match="cannot contain any None"):
        writer.history["y"][-2]


# --- TrajectoryColumn and CellRef


def test_trajectory_column_shapes_and_values(serve):
    _, client = serve(queue())
    writer = client.trajectory_writer(3, max_chunk_length=2)
    for i in range(3):
        writer.append({"x": np.full((2, 3), i, np.float32)})
    column = writer.history["x"][:]
    assert len(column) == 3
    assert column.shape == (3, 2, 3)
    assert column.dtype == np.float32
    assert not column.is_squeezed
    np.testing.assert_array_equal(column.numpy()[:, 0, 0], [0, 1, 2])
    single = column[1]
    assert single.is_squeezed and single.shape == (2, 3)
    np.testing.assert_array_equal(single.numpy(), np.full((2, 3), 1, np.float32))
    np.testing.assert_array_equal(column[1:].numpy()[:, 0, 0], [1, 2])
    np.testing.assert_array_equal(column[[2, 0]].numpy()[:, 0, 0], [2, 0])
    refs = list(column)
    assert len(refs) == 3 and all(isinstance(ref, resound.CellRef) for ref in refs)
    rebuilt = TrajectoryColumn(refs[1:], path=("x",))
    np.testing.assert_array_equal(rebuilt.numpy()[:, 0, 0], [1, 2])
    squeezed = TrajectoryColumn([refs[0]], squeeze=True)
    assert squeezed.shape == (2, 3) and squeezed.is_squeezed
    with pytest.raises(TypeError):
        column[1.5]


def test_trajectory_column_construction_errors(serve):
    _, client = serve(queue())
    writer = client.trajectory_writer(3)
    a = writer.append({"x": 1})["x"]
    b = writer.append({"x": 2})["x"]
    message = "Columns must contain exactly one data reference when squeeze set, got 2"
    with pytest.raises(ValueError, match=message):
        TrajectoryColumn([a, b], squeeze=True)
    with pytest.raises(ValueError, match="got 0"):
        TrajectoryColumn([], squeeze=True)
    with pytest.raises(ValueError, match=r"cannot contain any None.*path \('p',\)"):
        TrajectoryColumn([a, None], path=("p",))


def test_cell_ref_properties_and_expiry(serve):
    _, client = serve(queue())
    writer = client.trajectory_writer(2, max_chunk_length=2)
    ref = writer.append({"x": np.arange(3, dtype=np.int16)})["x"]
    assert not ref.expired
    assert tuple(ref.shape) == (3,)
    assert ref.dtype == np.int16
    np.testing.assert_array_equal(ref.numpy(), [0, 1, 2])
    writer.append({"x": np.arange(3, dtype=np.int16)})
    assert not ref.expired  # two steps kept
    writer.append({"x": np.arange(3, dtype=np.int16)})
    assert ref.expired
    assert tuple(ref.shape) == (3,) and ref.dtype == np.int16  # still describable
    with pytest.raises(RuntimeError, match="Cannot access data from expired WeakCellRef"):
        ref.numpy()
    with pytest.raises(RuntimeError, match="expired"):
        TrajectoryColumn([ref]).numpy()


def test_expired_ref_in_create_item_names_the_column(serve):
    server, client = serve(queue())
    writer = client.trajectory_writer(2)
    kept = writer.append({"x": 0, "y": 0})
    writer.append({"x": 1, "y": 1})
    writer.append({"x": 2, "y": 2})
    assert kept["y"].expired
    trajectory = [writer.history["x"][-1], TrajectoryColumn([kept["y"]])]
    with pytest.raises(ValueError, match=re.escape("Error in column 1: Column contains expired")):
        writer.create_item("q", 1.0, trajectory)
    # Same for a squeezed single reference (the fast path) and a longer column.
    with pytest.raises(ValueError, match="Error in column 0: Column contains expired CellRef."):
        writer.create_item("q", 1.0, [TrajectoryColumn([kept["x"]], squeeze=True)])
    with pytest.raises(ValueError, match="Error in column 0: Column contains expired CellRef."):
        writer.create_item("q", 1.0, [TrajectoryColumn([kept["x"], writer.history["x"][-1][0]])])
    writer.flush()
    assert size(server) == 0 and writer.num_pending_items == 0


@in_process_only
def test_references_of_a_pending_item_stay_alive_until_it_is_inserted(serve):
    server, client = serve(queue(max_size=1))
    writer = client.trajectory_writer(1)
    fill_queue(writer, 1)  # fills the queue
    ref = writer.append({"x": np.float32(1)})["x"]
    writer.create_item("q", 1.0, {"x": TrajectoryColumn([ref], squeeze=True)})
    assert writer.num_pending_items == 1
    writer.append({"x": np.float32(2)})  # beyond keep-alive, but the item needs it
    assert not ref.expired
    assert ref.numpy() == 1
    assert take(client, "q") == [[np.float32(0)]]
    writer.flush(timeout_ms=int(SAFETY * 1000))
    assert ref.expired
    assert take(client, "q") == [[np.float32(1)]]


@in_process_only
def test_pending_items_keep_chunks_after_their_rows_leave_the_window(serve):
    # Chunks of two steps, two steps kept alive: the item below references
    # four steps across two chunks, one of them still open when it is made.
    server, client = serve(queue(max_size=1))
    writer = client.trajectory_writer(4, max_chunk_length=2)
    fill_queue(writer, 1)  # fills the queue: the next item must wait
    for i in range(1, 4):
        writer.append({"x": np.float32(i)})
    writer.create_item("q", 1.0, {"x": writer.history["x"][-4:]})  # steps 0-3
    assert writer.num_pending_items == 1
    for i in range(4, 20):  # far beyond keep-alive
        writer.append({"x": np.float32(i)})
    assert take(client, "q") == [[np.float32(0)]]
    writer.flush(timeout_ms=int(SAFETY * 1000))
    np.testing.assert_array_equal(take(client, "q")[0][0], [0, 1, 2, 3])


def test_the_writer_keeps_only_the_chunks_its_references_reach(serve):
    _, client = serve(queue())
    # The tables' store in process, the remote clients' own over gRPC.
    store = client._transport.one_server()._store
    writer = client.trajectory_writer(5, max_chunk_length=2)
    refs = [writer.append({"x": np.float32(i)})["x"] for i in range(12)]

    def stored(steps: range) -> list[bool]:
        return [refs[step]._chunk.key in store for step in steps]

    # Steps 7-11 are alive, in chunks [6, 7], [8, 9], [10, 11]; older ones are gone.
    assert [ref.expired for ref in refs] == [True] * 7 + [False] * 5
    assert stored(range(12)) == [False] * 6 + [True] * 6
    assert [float(ref.numpy()) for ref in refs[7:]] == [7, 8, 9, 10, 11]
    refs.append(writer.append({"x": np.float32(12)})["x"])  # in an open chunk
    assert stored(range(12, 13)) == [False] and float(refs[12].numpy()) == 12
    writer.end_episode(clear_buffers=False)  # completes [12] as a one-step chunk
    assert stored(range(6, 13)) == [False, False] + [True] * 5  # [6, 7] has no live row
    writer.configure(("x",), num_keep_alive_refs=1, max_chunk_length=1)
    assert stored(range(8, 13)) == [False] * 4 + [True] and refs[11].expired
    refs.append(writer.append({"x": np.float32(0)})["x"])
    assert stored(range(12, 14)) == [False, True]
    writer.end_episode()
    assert stored(range(13, 14)) == [False]


def test_a_column_may_mix_references_of_like_columns(serve):
    _, client = serve(queue())
    writer = client.trajectory_writer(2)
    refs = writer.append({"a": np.float32(1), "b": np.float32(2), "c": np.int32(3)})
    writer.create_item("q", 1.0, TrajectoryColumn([refs["b"], refs["a"]]))
    with pytest.raises(ValueError, match="Error in column 0"):
        writer.create_item("q", 1.0, TrajectoryColumn([refs["a"], refs["c"]]))
    writer.flush()
    np.testing.assert_array_equal(take(client, "q")[0][0], np.array([2, 1], np.float32))


# --- create_item


def test_create_item_leaves_must_be_trajectory_columns(serve):
    server, client = serve(queue())
    writer = client.trajectory_writer(2)
    refs = writer.append({"x": 1})
    for trajectory in (
        {"x": refs["x"]},
        {"x": np.zeros(2)},
        [writer.history["x"][-1], 5],
        writer.history["x"],
    ):
        with pytest.raises(TypeError):
            writer.create_item("q", 1.0, trajectory)
    assert writer.num_pending_items == 0 and size(server) == 0


def test_create_item_rejects_empty_trajectories_and_columns(serve):
    server, client = serve(queue())
    writer = client.trajectory_writer(3)
    for i in range(3):
        writer.append({"x": i})
    for trajectory in ({}, [], {"a": []}, TrajectoryColumn([]), [writer.history["x"][1:1]]):
        with pytest.raises(ValueError, match="trajectory must not be empty."):
            writer.create_item("q", 1.0, trajectory)
    with pytest.raises(ValueError, match="Error in column 1: Column must not be empty."):
        writer.create_item("q", 1.0, [writer.history["x"][-1], writer.history["x"][5:]])
    # The writer is still usable.
    writer.create_item("q", 1.0, writer.history["x"][:])
    writer.flush()
    np.testing.assert_array_equal(take(client, "q")[0][0], [0, 1, 2])


def test_create_item_validates_the_priority(serve):
    server, client = serve(queue(), prioritized())
    writer = client.trajectory_writer(2)
    writer.append({"x": 1})
    column = writer.history["x"][-1]
    with pytest.raises(ValueError, match="^`priority` must not be nan.$"):
        writer.create_item("q", float("nan"), column)
    for bad in (float("inf"), -float("inf")):
        for table in ("q", "p"):
            with pytest.raises(ValueError, match="finite"):
                writer.create_item(table, bad, column)
    with pytest.raises(ValueError, match="Prioritized"):
        writer.create_item("p", -1.0, column)
    writer.flush()
    assert size(server, "q") == size(server, "p") == 0
    # Negative priorities are fine where nothing is prioritized; zero everywhere.
    writer.create_item("q", -2.5, column)
    writer.create_item("p", 0.0, column)
    writer.flush()
    assert [item.priority for item in items(server, "q")] == [-2.5]
    assert [item.priority for item in items(server, "p")] == [0.0]


def test_create_item_priority_must_be_a_number(serve):
    server, client = serve(queue())
    writer = client.trajectory_writer(2)
    writer.append({"x": 1})
    column = writer.history["x"][-1]
    for bad in ("1.5", True, np.bool_(False), None, [1.0]):
        with pytest.raises(ValueError, match="priority must be a number"):
            writer.create_item("q", bad, column)
    for good in (2, np.float32(0.5), np.int64(3)):
        writer.create_item("q", good, column)
    writer.flush()
    assert [item.priority for item in items(server)] == [2.0, 0.5, 3.0]


def test_create_item_for_an_unknown_table(serve):
    server, client = serve(queue())
    writer = client.trajectory_writer(2)
    writer.append({"x": 1})
    message = "Unable to create item in table 'nope' since the table could not be found."
    with pytest.raises(ValueError, match=re.escape(message)):
        writer.create_item("nope", 1.0, writer.history["x"][-1])
    writer.create_item("q", 1.0, writer.history["x"][-1])  # still usable
    writer.flush()
    assert size(server) == 1


SIGNATURE = {"obs": TensorSpec((2, 3), np.float32), "step": TensorSpec((), np.int64)}


@pytest.mark.parametrize(
    "make_trajectory, message",
    [
        (
            lambda h: {"obs": h["obs"][-2:]},
            "Unable to create item in table 'q': the trajectory has 1 fields but the table "
            "signature has 2 (field ('obs',), field ('step',)).",
        ),
        (
            lambda h: {"obs": h["obs"][-2:], "step": h["step"][-1], "x": h["step"][-1]},
            "the trajectory has 3 fields but the table signature has 2",
        ),
        (
            lambda h: {"obs": h["obs"][-3:], "step": h["step"][-1]},
            "table 'q': field ('obs',) is float32 [3, 3] but the signature expects float32 [2, 3]",
        ),
        (
            lambda h: {"obs": h["obs"][-2:], "step": h["step"][-2:]},
            "table 'q': field ('step',) is int64 [2] but the signature expects int64 []",
        ),
        (
            lambda h: {"obs": h["obs"][-2:], "step": h["obs"][-1]},
            "table 'q': field ('step',) is float32 [3] but the signature expects int64 []",
        ),
    ],
    ids=["too-few", "too-many", "shape", "unsqueezed", "dtype"],
)
def test_create_item_checks_the_table_signature(serve, make_trajectory, message):
    server, client = serve(queue(signature=SIGNATURE))
    writer = client.trajectory_writer(3)
    for i in range(3):
        writer.append({"obs": np.full(3, i, np.float32), "step": i})
    with pytest.raises(ValueError, match=re.escape(message)):
        writer.create_item("q", 1.0, make_trajectory(writer.history))
    writer.create_item(
        "q", 1.0, {"obs": writer.history["obs"][-2:], "step": writer.history["step"][-1]}
    )
    writer.flush()
    assert size(server) == 1


def test_without_validation_the_table_refuses_a_mismatched_item(serve):
    # validate_items=False skips the writer's check; the table still checks
    # (docs/compatibility.md item 15), and as in Reverb a refused item is a
    # permanent error.
    server, client = serve(queue(signature=SIGNATURE))
    writer = client.trajectory_writer(2, validate_items=False)
    for step in range(2):
        writer.append({"obs": np.zeros(3), "step": step})  # float64, not float32
    history = writer.history
    with pytest.raises(ValueError, match="signature"):
        writer.create_item("q", 1.0, {"obs": history["obs"][-2:], "step": history["step"][-1]})
        writer.flush()
    assert size(server) == 0
    with pytest.raises(ValueError, match="signature"):
        writer.append({"obs": np.zeros(3), "step": 2})
    writer.close()


@in_process_only
def test_items_before_a_refused_one_still_go_in(serve):
    # The core checks a whole batch before inserting any of it; the writer
    # must not let a refused item take the items queued before it along.
    signature = {"a": TensorSpec((), np.float32), "b": TensorSpec((), np.int64)}
    server, client = serve(queue(signature=signature))
    writer = client.trajectory_writer(2, validate_items=False)
    writer.append({"f": np.float32(1.5), "i": 7})
    f, i = writer.history["f"][-1], writer.history["i"][-1]
    writer.create_item("q", 1.0, {"a": f, "b": i})
    writer.create_item("q", 1.0, {"a": i, "b": f})  # refused by the table
    writer.create_item("q", 1.0, {"a": f, "b": i})
    assert writer.num_pending_items == 3  # all wait for the same two chunks
    with pytest.raises(ValueError, match="signature"):
        writer.flush()
    assert size(server) == 1
    assert take(client, "q") == [[np.float32(1.5), np.int64(7)]]
    with pytest.raises(ValueError, match="signature"):
        writer.flush()  # the error is permanent, as in Reverb
    writer.close()


@in_process_only
def test_create_item_never_blocks(serve):
    server, client = serve(queue(max_size=1))
    writer = client.trajectory_writer(1)
    call = Background(fill_queue, writer, 50)
    call.value()  # returns although the queue refuses all but the first item
    assert size(server) == 1
    assert writer.num_pending_items == 49
    writer.close()


@in_process_only
def test_unbounded_run_ahead_is_kept_in_order(serve):
    # docs/semantics.md §5.4: in-process, items wait in the writer without bound;
    # all arrive, in order, once sampled.
    server, client = serve(queue(max_size=3))
    writer = client.trajectory_writer(1)
    fill_queue(writer, 20)
    assert writer.num_pending_items == 17
    got = [data[0] for data in take(client, "q", 20)]
    np.testing.assert_array_equal(got, np.arange(20, dtype=np.float32))
    wait_until(lambda: writer.num_pending_items == 0, "the writer drained")


# --- flush


@in_process_only
def test_items_wait_for_their_chunks(serve):
    server, client = serve(queue())
    writer = client.trajectory_writer(4, max_chunk_length=4)
    writer.append({"x": 0})
    writer.create_item("q", 1.0, writer.history["x"][-1])
    assert writer.num_pending_items == 1 and size(server) == 0
    for i in range(1, 3):
        writer.append({"x": i})
    assert writer.num_pending_items == 1 and size(server) == 0
    writer.append({"x": 3})  # completes the chunk: the item goes in
    assert writer.num_pending_items == 0 and size(server) == 1
    (item,) = items(server)
    assert [chunk.num_steps for chunk in item.chunks] == [4]
    assert item.trajectory == [([(item.chunks[0].key, 0, 1)], True)]


def test_flush_completes_chunks_early(serve):
    server, client = serve(queue())
    writer = client.trajectory_writer(8, max_chunk_length=8)
    for i in range(3):
        writer.append({"x": i})
    writer.create_item("q", 1.0, writer.history["x"][1:])
    writer.flush()
    assert writer.num_pending_items == 0
    (item,) = items(server)
    assert [(c.num_steps, c.start_step, c.end_step) for c in item.chunks] == [(3, 0, 2)]
    # The next steps start a new chunk.
    for i in range(3, 5):
        writer.append({"x": i})
    writer.create_item("q", 1.0, writer.history["x"][2:])
    writer.flush()
    chunks = items(server)[1].chunks
    assert sorted((c.num_steps, c.start_step) for c in chunks) == [(2, 3), (3, 0)]
    assert [data[0].tolist() for data in take(client, "q", 2)] == [[1, 2], [2, 3, 4]]


def test_flush_keeps_the_last_n_items_over_open_chunks(serve):
    server, client = serve(queue())
    writer = client.trajectory_writer(4, max_chunk_length=4)
    writer.append({"a": 1, "b": 2})
    writer.create_item("q", 1.0, writer.history["a"][-1])
    writer.create_item("q", 2.0, writer.history["b"][-1])
    assert writer.num_pending_items == 2
    writer.flush(block_until_num_items=2)
    assert writer.num_pending_items == 2 and size(server) == 0
    writer.flush(block_until_num_items=1)  # completes only column a's chunk
    assert writer.num_pending_items == 1 and size(server) == 1
    assert [item.priority for item in items(server)] == [1.0]
    writer.flush()
    assert writer.num_pending_items == 0 and size(server) == 2


def test_flush_rejects_negative_counts(serve):
    _, client = serve(queue())
    writer = client.trajectory_writer(2)
    with pytest.raises(ValueError, match="block_until_num_items must be >= 0, got -1"):
        writer.flush(-1)
    with pytest.raises(ValueError):
        writer.flush(1.5)  # type: ignore[arg-type]


def test_flush_with_nothing_pending_returns_at_once(serve):
    _, client = serve(queue())
    writer = client.trajectory_writer(2)
    writer.flush()
    writer.flush(timeout_ms=0)
    writer.append({"x": 1})
    writer.flush(timeout_ms=0)


@in_process_only
@pytest.mark.parametrize("timeout_ms", [0, 50])
def test_flush_timeout_on_a_rate_limited_table(serve, timeout_ms):
    server, client = serve(queue(max_size=2))
    writer = client.trajectory_writer(1)
    fill_queue(writer, 5)
    assert size(server) == 2 and writer.num_pending_items == 3
    start = time.monotonic()
    message = (
        "Flush call did not complete within provided timeout of "
        f"0:00:00{'.050000' if timeout_ms else ''}"
    )
    with pytest.raises(resound.DeadlineExceededError, match=re.escape(message)):
        writer.flush(timeout_ms=timeout_ms)
    elapsed = time.monotonic() - start
    assert timeout_ms / 1000 <= elapsed < SAFETY / 2
    # The items keep flowing without further calls once the limiter allows.
    first = take(client, "q", 2)
    wait_until(lambda: size(server) == 2, "the sender inserted two more items")
    wait_until(lambda: writer.num_pending_items == 1, "two items left the writer")
    rest = take(client, "q", 3)
    assert [data[0] for data in first + rest] == [np.float32(i) for i in range(5)]
    wait_until(lambda: writer.num_pending_items == 0, "the writer drained")
    writer.flush(timeout_ms=0)


def test_flush_without_timeout_waits_for_the_rate_limiter(serve):
    server, client = serve(queue(max_size=1))
    writer = client.trajectory_writer(1)
    fill_queue(writer, 3)
    call = Background(writer.flush)
    got = take(client, "q", 3)
    call.value()
    assert writer.num_pending_items == 0
    assert [data[0] for data in got] == [np.float32(i) for i in range(3)]


@in_process_only
def test_a_blocked_flush_can_be_interrupted(serve):
    # Ctrl-C (here a timer signal raising KeyboardInterrupt) reaches a flush
    # that waits for the rate limiter, and the writer carries on afterwards.
    server, client = serve(queue(max_size=1))
    writer = client.trajectory_writer(1)
    fill_queue(writer, 3)

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    # Safety net only: if the signal never gets through, stopping the server
    # ends the flush (CancelledError), so the test fails instead of hanging.
    rescue = threading.Timer(SAFETY / 2, server.stop)
    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        rescue.start()
        with pytest.raises(KeyboardInterrupt):
            signal.setitimer(signal.ITIMER_REAL, 0.2)
            writer.flush()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        rescue.cancel()
    assert writer.num_pending_items == 2
    got = take(client, "q", 3)
    writer.flush(timeout_ms=int(SAFETY * 1000))
    assert [data[0] for data in got] == [np.float32(i) for i in range(3)]


@in_process_only
def test_flush_with_block_until_counts_rate_limited_items(serve):
    server, client = serve(queue(max_size=1))
    writer = client.trajectory_writer(1)
    fill_queue(writer, 3)
    writer.flush(block_until_num_items=2)  # one in the table, two waiting
    with pytest.raises(resound.DeadlineExceededError):
        writer.flush(block_until_num_items=1, timeout_ms=10)
    take(client, "q")
    writer.flush(block_until_num_items=1, timeout_ms=int(SAFETY * 1000))
    assert writer.num_pending_items <= 1


# --- end_episode


def test_end_episode_clears_references_and_history(serve):
    server, client = serve(uniform())
    writer = client.trajectory_writer(3, max_chunk_length=3)
    refs = [writer.append({"x": i})["x"] for i in range(2)]
    writer.create_item("u", 1.0, writer.history["x"][:])
    writer.end_episode()
    assert size(server, "u") == 1  # flushed
    assert all(ref.expired for ref in refs)
    assert writer.episode_steps == 0
    assert len(writer.history["x"]) == 0
    with pytest.raises(ValueError, match="Column contains expired CellRef"):
        writer.create_item("u", 1.0, TrajectoryColumn(refs))
    writer.append({"x": 10})
    assert len(writer.history["x"]) == 1 and writer.history["x"][0].numpy() == 10
    writer.create_item("u", 1.0, writer.history["x"][:])
    writer.end_episode()
    first, second = items(server, "u")
    assert first.chunks[0].episode_id != second.chunks[0].episode_id
    assert (second.chunks[0].start_step, second.chunks[0].end_step) == (0, 0)
    assert server.table("u").info.num_episodes == 2


def test_end_episode_without_clearing_keeps_references(serve):
    server, client = serve(uniform())
    writer = client.trajectory_writer(4, max_chunk_length=4)
    old = [writer.append({"x": i})["x"] for i in range(3)]
    writer.end_episode(clear_buffers=False)
    assert writer.episode_steps == 0
    assert not any(ref.expired for ref in old)
    assert len(writer.history["x"]) == 3  # history continues
    for i in range(3, 5):
        writer.append({"x": i})
    assert writer.episode_steps == 2
    assert len(writer.history["x"]) == 5
    writer.create_item("u", 1.0, writer.history["x"][-4:])  # spans both episodes
    writer.flush()
    (item,) = items(server, "u")
    chunks = {chunk.key: chunk for chunk in item.chunks}
    # The first episode's open chunk was completed at the boundary.
    spans = sorted((c.start_step, c.end_step, c.num_steps) for c in chunks.values())
    assert spans == [(0, 1, 2), (0, 2, 3)]
    assert len({chunk.episode_id for chunk in chunks.values()}) == 2
    assert server.table("u").info.num_episodes == 2
    np.testing.assert_array_equal(take(client, "u")[0][0], [1, 2, 3, 4])


def test_end_episode_flushes_pending_items(serve):
    server, client = serve(queue())
    writer = client.trajectory_writer(8, max_chunk_length=8)
    for i in range(3):
        writer.append({"x": i})
        writer.create_item("q", 1.0, writer.history["x"][-1])
    assert size(server) == 0
    writer.end_episode()
    assert size(server) == 3 and writer.num_pending_items == 0


def test_an_item_cannot_span_a_cleared_episode_boundary(serve):
    server, client = serve(uniform())
    writer = client.trajectory_writer(4, max_chunk_length=2)
    for i in range(3):
        writer.append({"x": i})
    old_run = writer.history["x"][-2:]  # consecutive references (a history slice)
    old_one = writer.history["x"][-1]
    writer.end_episode(clear_buffers=True)
    writer.append({"x": 3})
    new_one = writer.history["x"][-1]
    spanning = TrajectoryColumn([*old_run, *new_one])
    for column in (old_run, old_one, spanning, old_run[::-1]):
        with pytest.raises(ValueError, match="Column contains expired CellRef"):
            writer.create_item("u", 1.0, {"x": column})
    with pytest.raises(RuntimeError, match="expired"):
        old_one.numpy()
    writer.create_item("u", 1.0, {"x": new_one})  # the new episode's own step is fine
    writer.flush()
    assert size(server, "u") == 1
    np.testing.assert_array_equal(take(client, "u")[0][0], 3)


def test_an_item_may_span_a_kept_episode_boundary(serve):
    server, client = serve(uniform())
    writer = client.trajectory_writer(4, max_chunk_length=2)
    for i in range(3):
        writer.append({"x": i})
    old_run = writer.history["x"][-2:]
    writer.end_episode(clear_buffers=False)
    writer.append({"x": 3})
    writer.create_item("u", 1.0, {"x": TrajectoryColumn([*old_run, *writer.history["x"][-1]])})
    writer.flush()
    (item,) = items(server, "u")
    assert len({chunk.episode_id for chunk in item.chunks}) == 2
    np.testing.assert_array_equal(take(client, "u")[0][0], [1, 2, 3])


@pytest.mark.parametrize("timeout_ms", [0, 30])
def test_end_episode_timeout_still_starts_a_new_episode(serve, timeout_ms):
    server, client = serve(queue(max_size=1))
    writer = client.trajectory_writer(4, max_chunk_length=1)
    fill_queue(writer, 3)  # one item in the table, two waiting for room
    refs = writer.history["x"][:]
    with pytest.raises(
        resound.DeadlineExceededError, match="End episode call did not complete within"
    ):
        writer.end_episode(timeout_ms=timeout_ms)
    # The buffers and the episode were reset all the same.
    assert writer.episode_steps == 0
    assert len(writer.history["x"]) == 0
    assert all(ref.expired for ref in refs)  # also those the waiting items use
    with pytest.raises(ValueError, match="Column contains expired CellRef"):
        writer.create_item("q", 1.0, {"x": refs[-1:]})
    writer.append({"x": np.float32(3)})
    writer.create_item("q", 1.0, {"x": writer.history["x"][-1]})
    # The waiting items still go in, in order, and the new one after them.
    assert [data[0].tolist() for data in take(client, "q", 4)] == [0.0, 1.0, 2.0, 3.0]
    writer.end_episode(timeout_ms=int(SAFETY * 1000))
    assert writer.num_pending_items == 0


def test_end_episode_timeout_keeping_the_buffers(serve):
    server, client = serve(queue(max_size=1))
    writer = client.trajectory_writer(4, max_chunk_length=1)
    fill_queue(writer, 3)
    refs = writer.history["x"][:]
    with pytest.raises(resound.DeadlineExceededError):
        writer.end_episode(clear_buffers=False, timeout_ms=0)
    assert writer.episode_steps == 0
    assert len(writer.history["x"]) == 3  # the history continues
    assert not any(ref.expired for ref in refs)
    writer.append({"x": np.float32(3)})
    writer.create_item("q", 1.0, {"x": writer.history["x"][-2:]})  # spans the boundary
    got = take(client, "q", 4)
    assert [data[0].tolist() for data in got] == [0.0, 1.0, 2.0, [2.0, 3.0]]


def test_end_episode_timeout_draws_a_new_episode_id(serve):
    server, client = serve(queue(max_size=1))
    writer = client.trajectory_writer(2, max_chunk_length=1)
    fill_queue(writer, 2)
    with pytest.raises(resound.DeadlineExceededError):
        writer.end_episode(timeout_ms=0)
    writer.append({"x": np.float32(2)})
    writer.create_item("q", 1.0, writer.history["x"][-1])
    episodes = []
    for _ in range(3):
        (sample,) = server.table("q")._core.sample(1, SAFETY)
        episodes.append(sample.chunks[0].episode_id)
    assert episodes[0] == episodes[1] != episodes[2]


def test_end_episode_rejects_a_bad_timeout_without_ending_the_episode(serve):
    _, client = serve(queue())
    writer = client.trajectory_writer(2)
    writer.append({"x": 1})
    with pytest.raises(ValueError, match="timeout_ms"):
        writer.end_episode(timeout_ms=-5)
    assert writer.episode_steps == 1
    assert len(writer.history["x"]) == 1


# --- close, context manager, garbage collection


@in_process_only
def test_close_drops_pending_items_and_disables_the_writer(serve):
    server, client = serve(queue(max_size=1))
    writer = client.trajectory_writer(2, max_chunk_length=2)
    fill_queue(writer, 3)  # one in, one rate limited, one over an open chunk
    assert writer.num_pending_items == 2
    writer.close()
    writer.close()  # idempotent
    assert writer.num_pending_items == 0
    message = "TrajectoryWriter::Close has been called."
    calls = [
        lambda: writer.append({"x": np.float32(1)}),
        lambda: writer.create_item("q", 1.0, writer.history["x"][-1]),
        lambda: writer.flush(),
        lambda: writer.end_episode(),
        lambda: writer.configure(("x",), num_keep_alive_refs=2, max_chunk_length=1),
    ]
    for call in calls:
        with pytest.raises(RuntimeError, match=re.escape(message)):
            call()
    assert take(client, "q") == [[np.float32(0)]]
    with pytest.raises(resound.DeadlineExceededError):
        take_now(client)
    assert size(server) == 0


def take_now(client: resound.Client) -> Any:
    return next(client.sample("q", emit_timesteps=False, timeout=0.05))


@in_process_only
def test_close_stops_the_sender_thread(serve):
    server, client = serve(queue(max_size=1))
    writer = client.trajectory_writer(1)
    fill_queue(writer, 3)
    sender = writer._sender
    assert sender is not None and sender.is_alive()
    writer.close()
    sender.join(SAFETY)
    assert not sender.is_alive()
    take(client, "q")
    with pytest.raises(resound.DeadlineExceededError):
        take_now(client)


def test_context_manager_flushes_on_exit_and_does_not_close(serve):
    server, client = serve(queue())
    with client.trajectory_writer(4, max_chunk_length=4) as writer:
        writer.append({"x": 1})
        writer.create_item("q", 1.0, writer.history["x"][-1])
        assert size(server) == 0
    assert size(server) == 1 and writer.num_pending_items == 0
    writer.append({"x": 2})  # still open


def test_context_manager_flushes_when_another_error_propagates(serve):
    server, client = serve(queue())
    with pytest.raises(KeyError), client.trajectory_writer(4) as writer:
        writer.append({"x": 1})
        writer.create_item("q", 1.0, writer.history["x"][-1])
        raise KeyError("boom")
    assert size(server) == 1


@in_process_only
def test_context_manager_does_not_flush_when_a_reverb_error_propagates(serve):
    server, client = serve(queue(max_size=1))
    writer = client.trajectory_writer(4)

    def run() -> None:
        with writer:
            fill_queue(writer, 2)
            writer.flush(timeout_ms=0)  # the full queue refuses the second item

    # __exit__ does not wait for the refused item (a flush would block).
    Background(run).raised(resound.DeadlineExceededError)
    assert writer.num_pending_items == 1
    assert [data[0] for data in take(client, "q", 2)] == [np.float32(0), np.float32(1)]
    writer.close()


@in_process_only
def test_a_garbage_collected_writer_drops_its_items_and_stops(serve):
    server, client = serve(queue(max_size=1))
    writer = client.trajectory_writer(1)
    fill_queue(writer, 3)
    sender = writer._sender
    assert sender is not None and sender.is_alive()
    alive = weakref.ref(writer)
    del writer

    def collected() -> bool:
        gc.collect()
        return alive() is None

    wait_until(collected, "the writer was collected")
    sender.join(SAFETY)
    assert not sender.is_alive()
    take(client, "q")
    with pytest.raises(resound.DeadlineExceededError):
        take_now(client)


def test_a_dropped_writer_without_a_sender_loses_unflushed_items(serve):
    server, client = serve(queue())
    writer = client.trajectory_writer(4, max_chunk_length=4)
    writer.append({"x": 1})
    writer.create_item("q", 1.0, writer.history["x"][-1])
    alive = weakref.ref(writer)
    del writer
    gc.collect()
    assert alive() is None
    assert size(server) == 0


EXIT_WITH_BLOCKED_SENDERS = """
import time
import numpy as np, resound
server = resound.Server([resound.Table.queue("q", 1)], listen=False)
client = server.in_process_client()
writers = []
for _ in range(8):
    writer = client.trajectory_writer(1)
    for i in range(3):
        writer.append({"x": np.float32(i)})
        writer.create_item("q", 1.0, writer.history["x"][-1])
    writers.append(writer)
assert all(writer._sender.is_alive() for writer in writers)


class Linger:
    # Keeps the interpreter in finalization long enough for every sender's
    # wait in the rate limiter (50 ms slices) to end.
    def __del__(self, sleep=time.sleep):
        sleep(0.2)


linger = Linger()
print("exiting")
"""


def test_interpreter_exit_with_rate_limited_writers_is_clean():
    # Sender threads waiting in the rate limiter are stopped before the
    # interpreter finalizes (they used to abort the process at exit).
    result = subprocess.run(
        [sys.executable, "-c", EXIT_WITH_BLOCKED_SENDERS],
        capture_output=True,
        text=True,
        timeout=SAFETY * 3,
        check=False,
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "exiting\n", "")


# --- configure


def test_configure_validates_its_arguments(serve):
    _, client = serve(queue())
    writer = client.trajectory_writer(4)
    with pytest.raises(ValueError, match="num_keep_alive_refs"):
        writer.configure(("x",), num_keep_alive_refs=0, max_chunk_length=None)
    with pytest.raises(ValueError, match="max_chunk_length"):
        writer.configure(("x",), num_keep_alive_refs=2, max_chunk_length=0)
    with pytest.raises(
        ValueError, match=re.escape("num_keep_alive_refs (2) must be >= max_chunk_length (3).")
    ):
        writer.configure(("x",), num_keep_alive_refs=2, max_chunk_length=3)
    with pytest.raises(ValueError, match=re.escape("(2) must be >= max_chunk_length (3)")):
        client.trajectory_writer(2, max_chunk_length=3)
    for keep_alive in (0, -1, 1.5, True):
        with pytest.raises(ValueError):
            client.trajectory_writer(keep_alive)


@in_process_only
def test_configure_sets_chunk_length_per_column(serve):
    server, client = serve(queue())
    writer = client.trajectory_writer(4, max_chunk_length=4)
    writer.configure(("b",), num_keep_alive_refs=4, max_chunk_length=1)
    writer.configure(("n", "c"), num_keep_alive_refs=4, max_chunk_length=2)
    for i in range(4):
        writer.append({"a": i, "b": i, "n": {"c": i}})
    history = writer.history
    writer.create_item(
        "q", 1.0, {"a": history["a"][:], "b": history["b"][:], "c": history["n"]["c"][:]}
    )
    assert size(server) == 1  # every chunk completed by the fourth step, no flush
    (item,) = items(server)
    lengths = {c.key: c.num_steps for c in item.chunks}
    per_column = [sorted(lengths[key] for key, _, _ in slices) for slices, _ in item.trajectory]
    assert per_column == [[4], [1, 1, 1, 1], [2, 2]]
    assert [data.tolist() for data in take(client, "q")[0]] == [[0, 1, 2, 3]] * 3


@in_process_only
def test_default_chunk_length_is_bounded_by_keep_alive(serve):
    server, client = serve(queue())
    writer = client.trajectory_writer(3)
    for i in range(3):
        writer.append({"x": i})
    writer.create_item("q", 1.0, writer.history["x"][:])
    assert size(server) == 1  # the third step completed a 3-step chunk
    assert [c.num_steps for c in items(server)[0].chunks] == [3]


def test_configure_keep_alive_per_column(serve):
    server, client = serve(queue())
    writer = client.trajectory_writer(2)
    writer.configure(("long",), num_keep_alive_refs=5, max_chunk_length=1)
    writer.configure(("short",), num_keep_alive_refs=1, max_chunk_length=1)
    for i in range(6):
        writer.append({"x": i, "long": i, "short": i})
    history = writer.history
    assert len(history["long"]) == len(history["x"]) == 6
    np.testing.assert_array_equal(history["long"][1:].numpy(), [1, 2, 3, 4, 5])
    # The history holds the largest keep-alive (5 steps) for every column ...
    with pytest.raises(ValueError, match="cannot contain any None"):
        history["long"][0]
    with pytest.raises(ValueError, match="cannot contain any None"):
        history["x"][0]
    # ... but the references of columns that keep fewer have expired.
    for column in (history["x"][-3], history["short"][-2]):
        with pytest.raises(ValueError, match="Error in column 1: Column contains expired"):
            writer.create_item("q", 1.0, [history["x"][-1], column])
    writer.create_item("q", 1.0, [history["long"][1:], history["short"][-1], history["x"][-2:]])
    writer.flush()
    long, short, x = take(client, "q")[0]
    np.testing.assert_array_equal(long, [1, 2, 3, 4, 5])
    assert short == 5
    np.testing.assert_array_equal(x, [4, 5])


@in_process_only
def test_configure_an_existing_column(serve):
    server, client = serve(queue())
    writer = client.trajectory_writer(4, max_chunk_length=4)
    writer.append({"x": 0})
    with pytest.raises(RuntimeError, match="open chunk"):
        writer.configure(("x",), num_keep_alive_refs=4, max_chunk_length=1)
    writer.end_episode(clear_buffers=False)  # completes the open chunk
    writer.configure(("x",), num_keep_alive_refs=4, max_chunk_length=1)
    writer.append({"x": 1})
    writer.create_item("q", 1.0, writer.history["x"][-1])
    assert size(server) == 1  # a one-step chunk is complete at once
    assert [c.num_steps for c in items(server)[0].chunks] == [1]


# --- compression and delta encoding

COMPRESSIBLE = [
    {
        "f": np.full(64, i * 0.5, np.float32),
        "i": np.arange(64, dtype=np.int16) * i - 50,
        "big": np.array([np.iinfo(np.int64).min + i, np.iinfo(np.int64).max - 3 * i]),
        "u": np.uint8(250 + i % 6),
        "b": np.array([i % 2 == 0, True, False]),
        "s": f"text {i}" * (i + 1),
        "y": b"by" * i,
    }
    for i in range(6)
]
COMPRESSIBLE_KEYS = sorted(COMPRESSIBLE[0])


def expected_column(key: str, steps: list[dict[str, Any]]) -> np.ndarray:
    # str is stored, and read back, as UTF-8 bytes.
    column = np.stack([np.asarray(step[key]) for step in steps])
    return np.char.encode(column, "utf-8") if column.dtype.kind == "U" else column


@pytest.mark.parametrize("delta", [False, True], ids=["plain", "delta"])
@pytest.mark.parametrize("compression", ["none", "lz4"])
@pytest.mark.parametrize("chunk_length", [1, 3, 6])
def test_compressed_chunks_round_trip_exactly(serve, compression, delta, chunk_length):
    server, client = serve(queue("t"))
    writer = client.trajectory_writer(
        6, max_chunk_length=chunk_length, compression=compression, delta_encoded=delta
    )
    for step in COMPRESSIBLE:
        writer.append(step)
    trajectory = {key: writer.history[key][:] for key in COMPRESSIBLE_KEYS}
    # Values read back through the references (decoded from completed chunks).
    for key in COMPRESSIBLE_KEYS:
        np.testing.assert_array_equal(trajectory[key].numpy(), expected_column(key, COMPRESSIBLE))
    writer.create_item("t", 1.0, trajectory)
    writer.create_item("t", 1.0, {key: writer.history[key][[4, 1]] for key in COMPRESSIBLE_KEYS})
    writer.create_item("t", 1.0, trajectory)
    writer.create_item("t", 1.0, trajectory)
    writer.flush()
    whole, reordered = take(client, "t", 2)
    batch = client.sample_batch("t", 2, timeout=SAFETY)
    for index, key in enumerate(COMPRESSIBLE_KEYS):
        want = expected_column(key, COMPRESSIBLE)
        np.testing.assert_array_equal(whole[index], want)
        # Strings come back as object arrays of bytes, as Reverb's.
        assert whole[index].dtype.kind == ("O" if want.dtype.kind == "S" else want.dtype.kind)
        np.testing.assert_array_equal(reordered[index], want[[4, 1]])
        for row in range(2):
            np.testing.assert_array_equal(batch.data[index][row], want)


@in_process_only
@pytest.mark.parametrize("delta", [False, True], ids=["plain", "delta"])
def test_lz4_chunks_are_compressed(serve, delta):
    server, client = serve(uniform())
    writer = client.trajectory_writer(8, compression="lz4", delta_encoded=delta)
    base = np.random.default_rng(0).integers(-(2**15), 2**15 - 8, 256).astype(np.int16)
    for i in range(8):
        writer.append({"f": np.zeros(256, np.float32), "i": base + i, "s": "same" * 8})
    writer.create_item("u", 1.0, {key: writer.history[key][:] for key in ("f", "i", "s")})
    (item,) = items(server, "u")
    by_dtype = {np.dtype(chunk.dtype).kind: chunk for chunk in item.chunks}
    for chunk in item.chunks:
        assert chunk.compression == "lz4"
        assert chunk.num_steps == 8
    for kind in ("f", "S"):
        assert by_dtype[kind].nbytes < by_dtype[kind].uncompressed_size / 4
        assert not by_dtype[kind].delta_encoded
    # Random rows that differ by a constant compress only as deltas.
    assert by_dtype["i"].delta_encoded == delta
    ratio = by_dtype["i"].nbytes / by_dtype["i"].uncompressed_size
    assert ratio < 0.25 if delta else ratio > 0.9
    np.testing.assert_array_equal(take(client, "u")[0][1], np.stack([base + i for i in range(8)]))


@in_process_only
def test_uncompressed_chunks_are_stored_as_is(serve):
    server, client = serve(uniform())
    writer = client.trajectory_writer(4, delta_encoded=True)
    for i in range(4):
        writer.append({"x": np.full(16, i, np.int32), "scalar": i})
    writer.create_item("u", 1.0, {"x": writer.history["x"][:], "s": writer.history["scalar"][:]})
    chunks = {np.dtype(c.dtype).itemsize: c for c in items(server, "u")[0].chunks}
    assert all(c.compression == "none" for c in chunks.values())
    assert chunks[4].delta_encoded  # int32 rows of rank 1
    assert not chunks[8].delta_encoded  # int64 scalars: nothing to gain
    assert chunks[8].nbytes == chunks[8].uncompressed_size == 4 * 8


@pytest.mark.parametrize("compression", ["snappy", "gzip", None, "LZ4", ""])
def test_unknown_compression_is_rejected(serve, compression):
    _, client = serve(queue())
    streams_before = insert_stream_threads()
    with pytest.raises(ValueError, match="compression"):
        client.trajectory_writer(2, compression=compression)
    # A refused writer opens no insert stream (whose thread would outlive it);
    # streams of earlier tests' writers may end meanwhile.
    assert insert_stream_threads() <= streams_before


def insert_stream_threads() -> set[threading.Thread]:
    return {thread for thread in threading.enumerate() if thread.name == "resound-insert-stream"}


# --- data round trips

NUMERIC_DTYPES = [
    np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64, np.complex64, np.complex128, np.bool_,
]  # fmt: skip


def sample_values(dtype: Any, count: int) -> list[np.ndarray]:
    """count distinct (2, 3) arrays of dtype, using the dtype's extremes."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return [np.array([[i % 2, 1, 0], [1, i % 3 == 0, 0]], bool) for i in range(count)]
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        base = np.array([[info.min, info.max, 0], [1, info.max - 1, info.min + 1]], dtype)
        return [(base + np.array(i, dtype)).astype(dtype) for i in range(count)]
    values = np.arange(6 * count, dtype=np.float64).reshape(count, 2, 3) / 7
    if dtype.kind == "c":
        return [(v + 1j * v[::-1]).astype(dtype) for v in values]
    out = [v.astype(dtype) for v in values]
    out[0][0, 0] = np.finfo(dtype).max
    out[0][0, 1] = np.finfo(dtype).tiny
    out[0][0, 2] = -0.0
    return out


@pytest.mark.parametrize("chunk_length", [1, 3])
@pytest.mark.parametrize("dtype", NUMERIC_DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_numeric_dtype_round_trips(serve, dtype, chunk_length):
    server, client = serve(queue())
    writer = client.trajectory_writer(3, max_chunk_length=chunk_length)
    values = sample_values(dtype, 3)
    for value in values:
        writer.append({"x": value, "scalar": value[0, 0]})
    writer.create_item("q", 1.0, {"x": writer.history["x"][:], "s": writer.history["scalar"][-1]})
    writer.create_item(
        "q", 1.0, {"x": writer.history["x"][[2, 0]], "s": writer.history["scalar"][0]}
    )
    writer.flush()
    (s1, x1), (s2, x2) = take(client, "q", 2)
    for got in (s1, x1, s2, x2):
        assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(x1, np.stack(values))
    np.testing.assert_array_equal(x2, np.stack([values[2], values[0]]))
    assert s1.shape == () and s1 == values[2][0, 0]
    assert s2 == values[0][0, 0]


def test_strings_and_bytes_round_trip(serve):
    server, client = serve(queue())
    writer = client.trajectory_writer(3, max_chunk_length=3)
    steps = [
        {"s": "a", "y": b"", "m": np.array([["x", "yy"], ["", "zzz"]])},
        {"s": "ünïcødé", "y": b"\x00\xff", "m": np.array([["1", "2"], ["3", "4"]])},
        {"s": "", "y": b"longer bytes", "m": np.array([["", ""], ["", "long string"]])},
    ]
    for step in steps:
        writer.append(step)
    writer.create_item("q", 1.0, {key: writer.history[key][:] for key in ("m", "s", "y")})
    writer.create_item("q", 1.0, {key: writer.history[key][1] for key in ("m", "s", "y")})
    writer.flush()
    whole, single = take(client, "q", 2)
    # Strings come back as bytes (str as UTF-8), in object arrays as Reverb's.
    for got, key in zip(whole, ("m", "s", "y"), strict=True):
        np.testing.assert_array_equal(got, expected_column(key, steps))
    assert whole[1].dtype == whole[2].dtype == object
    np.testing.assert_array_equal(single[0], np.char.encode(steps[1]["m"], "utf-8"))
    assert single[1] == "ünïcødé".encode() and single[2] == b"\x00\xff"


def test_object_arrays_of_strings_are_accepted(serve):
    server, client = serve(queue())
    writer = client.trajectory_writer(2, max_chunk_length=2)
    writer.append({"s": np.array(["a", "bc"], dtype=object), "y": np.array([b"x"], dtype=object)})
    writer.append({"s": np.array(["d", "e"], dtype=object), "y": np.array([b"yz"], dtype=object)})
    writer.create_item("q", 1.0, {"s": writer.history["s"][:], "y": writer.history["y"][:]})
    writer.flush()
    s, y = take(client, "q")[0]
    np.testing.assert_array_equal(s, [[b"a", b"bc"], [b"d", b"e"]])
    np.testing.assert_array_equal(y, [[b"x"], [b"yz"]])


NESTED_SIGNATURE = {
    "step": Step(
        obs={"pixels": TensorSpec((3, 2, 2), np.uint8), "vec": TensorSpec((3, 4), np.float32)},
        action=TensorSpec((3,), np.int32),
    ),
    "extras": [TensorSpec((), np.bool_), (TensorSpec((None,), bytes), TensorSpec((2,), str))],
}


def nested_step(i: int) -> Any:
    return {
        "step": Step(
            obs={
                "pixels": np.full((2, 2), i, np.uint8),
                "vec": np.arange(4, dtype=np.float32) + i,
            },
            action=np.int32(-i),
        ),
        "extras": [i % 2 == 0, (b"tag%d" % i, f"label {i}")],
    }


def nested_trajectory(history: Any) -> Any:
    step = history["step"]
    extras = history["extras"]
    return {
        "step": Step(
            obs={"pixels": step.obs["pixels"][-3:], "vec": step.obs["vec"][-3:]},
            action=step.action[-3:],
        ),
        "extras": [extras[0][-1], (extras[1][0][:], extras[1][1][-2:])],
    }


def check_nested(data: Any, batch: bool = False) -> None:
    assert isinstance(data, dict) and set(data) == {"step", "extras"}
    step, extras = data["step"], data["extras"]
    assert isinstance(step, Step) and isinstance(extras, list) and isinstance(extras[1], tuple)
    lead = (2,) if batch else ()
    np.testing.assert_array_equal(
        step.obs["pixels"],
        np.broadcast_to(np.arange(1, 4, dtype=np.uint8).reshape(3, 1, 1), lead + (3, 2, 2)),
    )
    assert step.obs["vec"].dtype == np.float32
    np.testing.assert_array_equal(
        step.obs["vec"],
        np.broadcast_to(np.arange(4) + np.arange(1, 4).reshape(3, 1), lead + (3, 4)),
    )
    np.testing.assert_array_equal(step.action, np.broadcast_to(np.int32([-1, -2, -3]), lead + (3,)))
    np.testing.assert_array_equal(extras[0], np.broadcast_to(False, lead))
    np.testing.assert_array_equal(
        extras[1][0], np.broadcast_to(np.array([b"tag0", b"tag1", b"tag2", b"tag3"]), lead + (4,))
    )
    np.testing.assert_array_equal(
        extras[1][1], np.broadcast_to(np.array([b"label 2", b"label 3"]), lead + (2,))
    )


def test_nested_trajectories_unpack_as_the_table_signature(serve):
    table = resound.Table(
        "t", selectors.Fifo(), selectors.Fifo(), 10, rate_limiters.MinSize(1),
        signature=NESTED_SIGNATURE,
    )  # fmt: skip
    server, client = serve(table)
    writer = client.trajectory_writer(4, max_chunk_length=2)
    for i in range(4):
        writer.append(nested_step(i))
    writer.create_item("t", 1.0, nested_trajectory(writer.history))
    writer.create_item("t", 1.0, nested_trajectory(writer.history))
    writer.flush()
    (sample,) = client.sample("t", emit_timesteps=False, unpack_as_table_signature=True)
    check_nested(sample.data)
    batch = client.sample_batch("t", 2, unpack_as_table_signature=True, timeout=SAFETY)
    check_nested(batch.data, batch=True)
    flat = next(client.sample("t", emit_timesteps=False)).data
    assert isinstance(flat, list) and len(flat) == 6


@pytest.mark.parametrize("chunk_length", [1, 4])
def test_multi_dimensional_steps_of_any_memory_layout(serve, chunk_length):
    server, client = serve(queue())
    writer = client.trajectory_writer(4, max_chunk_length=chunk_length)
    values = [np.arange(48, dtype=np.float64).reshape(2, 3, 8) * (i + 1) for i in range(4)]
    for value in values:
        writer.append({"x": value, "f": np.asfortranarray(value), "v": value[:, ::2, ::3]})
    history = writer.history
    writer.create_item("q", 1.0, [history["x"][1:3], history["f"][:], history["v"][[3, 0]]])
    writer.flush()
    x, f, v = take(client, "q")[0]
    np.testing.assert_array_equal(x, np.stack(values[1:3]))
    np.testing.assert_array_equal(f, np.stack(values))
    np.testing.assert_array_equal(v, np.stack([values[3], values[0]])[:, :, ::2, ::3])


# --- several writers


def test_writers_in_threads_into_one_table(serve):
    server, client = serve(uniform())
    num_writers, steps = 4, 200
    errors: list[BaseException] = []
    start = threading.Barrier(num_writers)

    def run(k: int) -> None:
        try:
            with client.trajectory_writer(3, max_chunk_length=2) as writer:
                start.wait(SAFETY)
                for i in range(steps):
                    writer.append({"k": np.int32(k), "i": np.int32(i)})
                    if len(writer.history["i"]) >= 3:
                        writer.create_item(
                            "u",
                            1.0,
                            {"k": writer.history["k"][-1], "i": writer.history["i"][-3:]},
                        )
                    if i % 50 == 0:
                        writer.end_episode(clear_buffers=i % 100 == 0)
        except BaseException as error:  # noqa: BLE001 - checked below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(num_writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(SAFETY)
    assert not errors
    # Episodes are cleared after steps 0 and 100: the history holds three
    # steps again at steps 3 and 103. The ends at 50 and 150 keep the history.
    expected = {(k, i) for k in range(num_writers) for i in range(3, steps) if i not in (101, 102)}
    assert size(server, "u") == len(expected)
    seen = set()
    for item in server.table("u")._core.snapshot():
        # Decoded as sampling decodes them.
        i, k = _codec.gather_item(item.trajectory, item.chunks, {})  # sorted keys
        assert k.shape == () and i.shape == (3,)
        np.testing.assert_array_equal(i, np.arange(i[-1] - 2, i[-1] + 1))
        seen.add((int(k), int(i[-1])))
    assert seen == expected
