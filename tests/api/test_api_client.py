"""resound.Client (docs/semantics.md §2.2-§2.7, §4, §6 and §8;
docs/compatibility.md items 6, 9, 14 and 23): insert, the sample generator,
sample_batch, sample_batches, priorities, reset, server_info, pickling."""

from __future__ import annotations

import collections
import gc
import math
import os
import pickle
import time
import types
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import resound
from resound import _core, _samples, rate_limiters, selectors
from resound.table import shared_chunk_store

from helpers.waiting import SAFETY, Background, wait_until

Step = collections.namedtuple("Step", ["obs", "reward"])

SIGNATURE = {
    "action": resound.TensorSpec((), np.int64),
    "step": Step(
        obs=resound.TensorSpec((2,), np.float32), reward=resound.TensorSpec((), np.float64)
    ),
}


def tables() -> list[resound.Table]:
    return [
        resound.Table(
            "uniform", selectors.Uniform(), selectors.Fifo(), 100, rate_limiters.MinSize(1)
        ),
        resound.Table(
            "prio", selectors.Prioritized(1.0), selectors.Fifo(), 100, rate_limiters.MinSize(1)
        ),
        resound.Table("fifo", selectors.Fifo(), selectors.Fifo(), 100, rate_limiters.MinSize(1)),
        resound.Table.queue("queue", 10),
        resound.Table(
            "signed",
            selectors.Fifo(),
            selectors.Fifo(),
            100,
            rate_limiters.MinSize(1),
            signature=SIGNATURE,
        ),
    ]


@pytest.fixture
def server() -> Iterator[resound.Server]:
    with resound.Server(tables(), listen=False) as server:
        yield server


@pytest.fixture
def client(server: resound.Server) -> resound.Client:
    return server.in_process_client()


def counters(server: resound.Server, table: str) -> dict[str, float]:
    return server.table(table)._core.info().rate_limiter


def priorities_by_key(server: resound.Server, table: str) -> dict[int, float]:
    return {item.key: item.priority for item in server.table(table)._core.snapshot()}


def keys(server: resound.Server, table: str) -> list[int]:
    return [item.key for item in server.table(table)._core.snapshot()]


def write_trajectory(client: resound.Client, table: str, length: int = 3) -> None:
    """One item of `length` steps: x float32[2] per step and a squeezed scalar r."""
    with client.trajectory_writer(length) as writer:
        for step in range(length):
            writer.append({"x": np.full(2, step, np.float32), "r": float(step)})
        writer.create_item(table, 1.0, {"x": writer.history["x"][:], "r": writer.history["r"][-1]})
        writer.flush()


# --- construction, repr, pickling


@pytest.mark.parametrize(
    ("address", "kind"), [("", ValueError), (None, TypeError), (8000, TypeError)]
)
def test_client_needs_an_address(address: object, kind: type[Exception]) -> None:
    with pytest.raises(kind, match="server_address"):
        resound.Client(address)  # type: ignore[arg-type]


def test_repr_and_server_address() -> None:
    client = resound.Client("localhost:1234")
    assert client.server_address == "localhost:1234"
    assert repr(client) == "Client, server_address=localhost:1234"


def test_pickling_keeps_only_the_address() -> None:
    with resound.Server(tables()) as server:
        client = server.localhost_client()
        client.insert(1, priorities={"uniform": 1.0})
        copy = pickle.loads(pickle.dumps(client))
        assert type(copy) is resound.Client
        assert copy is not client
        assert copy.server_address == client.server_address
        assert copy.server_info()["uniform"].current_size == 1
        # The in-process client of a listening server pickles as its address.
        direct = pickle.loads(pickle.dumps(server.in_process_client()))
        assert direct.server_address == f"localhost:{server.port}"
        assert direct.server_info()["uniform"].current_size == 1


def test_in_process_client_of_an_embedded_server_cannot_be_pickled(client: resound.Client) -> None:
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(client)


def test_checkpoint_without_a_checkpointer_goes_to_a_temporary_directory(
    client: resound.Client,
) -> None:
    client.insert({"x": np.arange(3)}, priorities={"uniform": 1.0})
    path = client.checkpoint()
    assert os.path.basename(path).startswith("checkpoint-") and os.path.isdir(path)
    summary = resound.checkpointers.inspect(path)
    assert {t["name"]: t["num_items"] for t in summary["tables"]}["uniform"] == 1


# --- unknown tables


def test_unknown_table_errors_are_not_found_errors(client: resound.Client) -> None:
    calls = [
        lambda: client.insert(1, priorities={"nope": 1.0}),
        lambda: next(client.sample("nope")),
        lambda: next(client.sample("nope", unpack_as_table_signature=True)),
        lambda: client.sample_batch("nope", 1),
        lambda: next(iter(client.sample_batches("nope", 1))),
        lambda: client.mutate_priorities("nope", updates={1: 1.0}),
        lambda: client.update_priorities("nope", {1: 1.0}),
        lambda: client.reset("nope"),
    ]
    for call in calls:
        with pytest.raises(resound.NotFoundError) as failure:
            call()
        assert isinstance(failure.value, KeyError)
        assert isinstance(failure.value, RuntimeError)
        assert isinstance(failure.value, resound.ReverbError)
        assert str(failure.value).startswith("Priority table nope was not found")


# --- insert


@pytest.mark.parametrize("priorities", [{}, None, [("uniform", 1.0)]])
def test_insert_needs_a_dict_of_priorities(client: resound.Client, priorities: object) -> None:
    with pytest.raises(ValueError, match="priorities"):
        client.insert(1, priorities=priorities)  # type: ignore[arg-type]


@pytest.mark.parametrize("table", ["uniform", "prio"])
@pytest.mark.parametrize("priority", [math.nan, math.inf, -math.inf, "1.0", None, True])
def test_insert_rejects_invalid_priorities(
    server: resound.Server, client: resound.Client, table: str, priority: object
) -> None:
    with pytest.raises(ValueError, match=f"priority for table '{table}'"):
        client.insert(np.arange(3), priorities={table: priority})  # type: ignore[dict-item]
    assert server.table(table).info.current_size == 0
    client.insert(np.arange(3), priorities={table: 1.0})  # the table keeps serving
    assert server.table(table).info.current_size == 1


def test_negative_priority_is_rejected_only_by_prioritized_tables(
    server: resound.Server, client: resound.Client
) -> None:
    with pytest.raises(ValueError, match=">= 0"):
        client.insert(1, priorities={"prio": -0.5})
    assert server.table("prio").info.current_size == 0
    client.insert(1, priorities={"uniform": -0.5})
    (sample,) = client.sample("uniform", emit_timesteps=False)
    assert sample.info.priority == -0.5


def test_a_rejected_multi_table_insert_inserts_nowhere(
    server: resound.Server, client: resound.Client
) -> None:
    with pytest.raises(ValueError):
        client.insert(1, priorities={"uniform": 1.0, "prio": math.nan})
    with pytest.raises(resound.NotFoundError):
        client.insert(1, priorities={"uniform": 1.0, "nope": 1.0})
    assert server.table("uniform").info.current_size == 0
    assert server.table("prio").info.current_size == 0


@pytest.mark.parametrize("data", [None, {}, [], {"a": None}])
def test_insert_needs_values(client: resound.Client, data: object) -> None:
    with pytest.raises(ValueError, match="data"):
        client.insert(data, priorities={"uniform": 1.0})


@pytest.mark.parametrize("timeout", [-1.0, "1", True])
def test_insert_rejects_bad_timeouts(client: resound.Client, timeout: object) -> None:
    with pytest.raises(ValueError, match="timeout"):
        client.insert(1, priorities={"uniform": 1.0}, timeout=timeout)  # type: ignore[arg-type]


def test_data_inserted_into_several_tables_is_stored_once(
    server: resound.Server, client: resound.Client
) -> None:
    store = shared_chunk_store()
    gc.collect()
    before = len(store)
    client.insert(np.arange(1000, dtype=np.int64), priorities={"uniform": 1.0, "fifo": 2.0})
    assert len(store) == before + 1
    (uniform_item,) = server.table("uniform")._core.snapshot()
    (fifo_item,) = server.table("fifo")._core.snapshot()
    assert [c.key for c in uniform_item.chunks] == [c.key for c in fifo_item.chunks]
    chunk_key = uniform_item.chunks[0].key
    assert chunk_key in store
    assert (uniform_item.priority, fifo_item.priority) == (1.0, 2.0)
    assert uniform_item.key != fifo_item.key
    uniform_info, fifo_info = (server.table(t).info for t in ("uniform", "fifo"))
    assert uniform_info.memory_bytes == fifo_info.memory_bytes >= 8000
    del uniform_item, fifo_item
    # The chunk lives while some item uses it.
    client.reset("uniform")
    assert chunk_key in store
    client.reset("fifo")
    assert chunk_key not in store


def test_insert_stores_a_trajectory_of_length_one(client: resound.Client) -> None:
    client.insert({"a": np.arange(3), "b": 2.5}, priorities={"fifo": 1.0})
    (sample,) = client.sample("fifo", emit_timesteps=False)
    np.testing.assert_array_equal(sample.data[0], [[0, 1, 2]])
    np.testing.assert_array_equal(sample.data[1], [2.5])


# --- the sample generator


def test_sample_is_lazy_and_yields_exactly_num_samples(
    server: resound.Server, client: resound.Client
) -> None:
    for value in range(3):
        client.insert(value, priorities={"uniform": 1.0})
    generator = client.sample("uniform", num_samples=5)
    assert counters(server, "uniform")["samples"] == 0
    first = next(generator)
    assert counters(server, "uniform")["samples"] >= 1
    rest = list(generator)
    assert len(rest) + 1 == 5
    assert counters(server, "uniform")["samples"] == 5
    assert all(isinstance(s, list) and len(s) == 1 for s in [first, *rest])


def test_sample_takes_large_items_a_few_megabytes_at_a_time(serve: Any) -> None:
    # Samples of a batch are views of its arrays: asking for many large
    # samples must not gather them all before giving out the first.
    server, client = serve(
        resound.Table("t", selectors.Uniform(), selectors.Fifo(), 100, rate_limiters.MinSize(1))
    )
    step = np.zeros(100_000, np.float32)  # 400 KB
    with client.trajectory_writer(1) as writer:
        for _ in range(20):
            writer.append(step)
            writer.create_item("t", 1.0, writer.history[-1:])
    taken = []
    generator = client.sample("t", num_samples=1000, emit_timesteps=False)
    for _ in range(12):
        next(generator)
        taken.append(counters(server, "t")["samples"])
    # One sample first (its size is not known before), then batches of
    # BATCH_BYTES (4 MB: 10 samples).
    per_batch = _samples.BATCH_BYTES // step.nbytes
    assert per_batch == 10
    assert taken[0] == 1
    assert taken[1] == taken[10] == 1 + per_batch
    assert taken[11] == 1 + 2 * per_batch
    assert sum(1 for _ in generator) == 1000 - 12
    # The size is remembered: the next call starts with a full batch.
    next(client.sample("t", num_samples=1000))
    assert counters(server, "t")["samples"] == 1000 + per_batch


def test_sample_of_string_columns_past_the_first_batch(serve: Any) -> None:
    # Strings come out as objects (their scalars are bytes); the batch's size
    # is taken from the arrays before that, for scalar and shaped columns.
    server, client = serve(resound.Table.queue("t", 100))
    with client.trajectory_writer(1) as writer:
        for i in range(30):
            writer.append({"text": np.array(b"step %d" % i), "pair": np.array([b"a", b"bc"])})
            writer.create_item("t", 1.0, {k: v[-1] for k, v in writer.history.items()})
    got = [s.data for s in client.sample("t", num_samples=30, emit_timesteps=False)]
    # Without a signature, data is the flat columns: "pair", then "text".
    assert [text for _, text in got] == [b"step %d" % i for i in range(30)]
    assert all(list(pair) == [b"a", b"bc"] for pair, _ in got)
    assert counters(server, "t")["samples"] == 30


def test_samples_of_a_stacked_batch_keep_each_column_s_form(serve: Any) -> None:
    # A batch whose columns stack gives each sample its rows: a column of
    # several steps keeps its time axis, a squeezed one is a 0-d array (not
    # a numpy scalar), whether or not the data is unpacked by a signature.
    signature = {
        "action": resound.TensorSpec((), np.int64),
        "obs": resound.TensorSpec((2, 2, 3), np.float32),
    }
    _, client = serve(resound.Table.queue("t", 100, signature=signature))
    with client.trajectory_writer(2) as writer:
        for i in range(6):
            writer.append({"action": np.int64(i), "obs": np.full((2, 3), i, np.float32)})
            if i:
                writer.create_item(
                    "t",
                    1.0,
                    {"action": writer.history["action"][-1], "obs": writer.history["obs"][-2:]},
                )
    flat = list(client.sample("t", num_samples=3, emit_timesteps=False))
    nested = list(
        client.sample("t", num_samples=2, emit_timesteps=False, unpack_as_table_signature=True)
    )
    for i, sample in enumerate(flat):
        action, obs = sample.data
        assert type(action) is np.ndarray and action.shape == () and int(action) == i + 1
        assert obs.shape == (2, 2, 3) and obs.dtype == np.float32
        np.testing.assert_array_equal(obs[:, 0, 0], [i, i + 1])
    for i, sample in enumerate(nested, start=3):
        assert set(sample.data) == {"action", "obs"}
        assert sample.data["action"].shape == () and int(sample.data["action"]) == i + 1
        np.testing.assert_array_equal(sample.data["obs"][:, 1, 2], [i, i + 1])
    assert len({s.info.key for s in flat + nested}) == 5


def test_more_samples_than_one_pass_takes_are_all_returned(serve: Any) -> None:
    # A table gives at most MAX_SAMPLES_PER_CALL samples per pass: the client
    # asks again until it has them all, over every transport.
    _, client = serve(tables()[0])
    client.insert(np.float32(1.0), priorities={"uniform": 1.0})
    count = _core.MAX_SAMPLES_PER_CALL + 5
    assert len(client.sample_batch("uniform", count).info.key) == count
    assert sum(1 for _ in client.sample("uniform", num_samples=count)) == count


def test_more_samples_than_one_pass_takes_from_several_servers() -> None:
    servers = [resound.Server([tables()[0]]) for _ in range(2)]
    try:
        client = resound.Client([f"127.0.0.1:{server.port}" for server in servers])
        for server in servers:
            server.in_process_client().insert(np.float32(1.0), priorities={"uniform": 1.0})
        count = 2 * _core.MAX_SAMPLES_PER_CALL + 5
        assert len(client.sample_batch("uniform", count).info.key) == count
    finally:
        for server in servers:
            server.stop()


def test_sample_checks_its_arguments_at_call_time(client: resound.Client) -> None:
    for count in (0, -1, 1.5):
        with pytest.raises(ValueError, match="num_samples"):
            client.sample("uniform", count)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout"):
        client.sample("uniform", timeout=-1)
    client.sample("nope")  # an unknown table is only found out on next()


def test_sample_emit_timesteps(client: resound.Client) -> None:
    with client.trajectory_writer(3) as writer:
        for step in range(3):
            writer.append({"x": np.full(2, step, np.float32), "y": step})
        writer.create_item("fifo", 1.5, {"x": writer.history["x"][:], "y": writer.history["y"][:]})
        writer.flush()

    (timesteps,) = client.sample("fifo")
    assert isinstance(timesteps, list)
    assert len(timesteps) == 3
    for step, sample in enumerate(timesteps):
        assert isinstance(sample, resound.ReplaySample)
        assert sample.info == timesteps[0].info
        x, y = sample.data
        np.testing.assert_array_equal(x, np.full(2, step, np.float32))
        assert x.dtype == np.float32
        assert y.shape == ()
        assert y == step

    (whole,) = client.sample("fifo", emit_timesteps=False)
    assert isinstance(whole, resound.ReplaySample)
    x, y = whole.data
    assert x.shape == (3, 2)
    np.testing.assert_array_equal(y, [0, 1, 2])
    assert whole.info.times_sampled == 2


def test_sample_emit_timesteps_counts_a_squeezed_column_as_one_step(
    client: resound.Client,
) -> None:
    # As in Reverb: a column given as one step without its time axis is one
    # timestep long, and is emitted whole. (The queue gives items in order.)
    with client.trajectory_writer(3) as writer:
        for step in range(3):
            writer.append({"x": np.full(3, step, np.float32), "y": step})
        history = writer.history
        # Only squeezed columns; then beside a one-step column; then beside three steps.
        for y in (history["y"][-1], history["y"][-1:], history["y"][:]):
            writer.create_item("queue", 1.0, {"x": history["x"][-1], "y": y})
        writer.flush()

    for _ in range(2):
        (timesteps,) = client.sample("queue")
        assert len(timesteps) == 1
        x, y = timesteps[0].data
        np.testing.assert_array_equal(x, np.full(3, 2, np.float32))  # whole, not its row 0
        assert (y.shape, y) == ((), 2)
    with pytest.raises(ValueError, match="Can't split non timestep trajectory"):
        next(iter(client.sample("queue")))


def test_sample_emit_timesteps_of_batches_of_several_samples(serve: Any) -> None:
    # Batches of several samples, stacked (every sample alike) and not (a
    # column squeezed in some samples only): each sample is its own list of
    # timesteps, in the order of the queue.
    _, client = serve(resound.Table.queue("t", 100))
    with client.trajectory_writer(3) as writer:
        for step in range(3):
            writer.append({"x": np.full(2, step, np.float32), "y": step})
        history = writer.history
        for _ in range(5):  # alike: x of 3 steps, y of 3 steps
            writer.create_item("t", 1.0, {"x": history["x"][:], "y": history["y"][:]})
        for y in (history["y"][-1], history["y"][-1:], history["y"][-1]):  # y squeezed or not
            writer.create_item("t", 1.0, {"x": history["x"][-1], "y": y})
        writer.flush()
    (first,) = client.sample("t")  # the first batch is of one (its size is not known yet)
    alike = list(client.sample("t", num_samples=4))
    for timesteps in [first, *alike]:
        assert [(x.tolist(), y.item()) for x, y in (s.data for s in timesteps)] == [
            ([0.0, 0.0], 0),
            ([1.0, 1.0], 1),
            ([2.0, 2.0], 2),
        ]
        assert all(s.info == timesteps[0].info for s in timesteps)
    assert len({timesteps[0].info.key for timesteps in [first, *alike]}) == 5
    mixed = list(client.sample("t", num_samples=3))
    assert [len(timesteps) for timesteps in mixed] == [1, 1, 1]
    for (sample,) in mixed:
        x, y = sample.data
        assert x.tolist() == [2.0, 2.0] and (y.shape, y.item()) == ((), 2)


def test_sample_cannot_split_columns_of_different_lengths(client: resound.Client) -> None:
    with client.trajectory_writer(3) as writer:
        for step in range(3):
            writer.append({"x": step, "y": step})
        writer.create_item("fifo", 1.0, {"x": writer.history["x"][:], "y": writer.history["y"][1:]})
        writer.flush()
    with pytest.raises(ValueError, match="Can't split non timestep trajectory into timesteps"):
        next(client.sample("fifo"))
    (sample,) = client.sample("fifo", emit_timesteps=False)
    assert [c.shape for c in sample.data] == [(3,), (2,)]


def test_sample_info_fields_are_python_scalars(
    server: resound.Server, client: resound.Client
) -> None:
    client.insert(1, priorities={"uniform": 2.5})
    client.insert(2, priorities={"uniform": 2.5})
    (sample,) = client.sample("uniform", emit_timesteps=False)
    info = sample.info
    assert isinstance(info, resound.SampleInfo)
    assert [type(v) for v in info] == [int, float, int, float, int]
    assert info.key in keys(server, "uniform")
    assert (info.probability, info.table_size, info.priority, info.times_sampled) == (
        0.5,
        2,
        2.5,
        1,
    )


def test_unpack_as_table_signature_restores_the_nesting(client: resound.Client) -> None:
    data = {
        "action": 3,
        "step": Step(obs=np.array([1.0, 2.0], np.float32), reward=0.5),
    }
    client.insert(data, priorities={"signed": 1.0})

    (flat,) = client.sample("signed", emit_timesteps=False)
    assert isinstance(flat.data, list)
    assert len(flat.data) == 3  # action, step/obs, step/reward

    (whole,) = client.sample("signed", emit_timesteps=False, unpack_as_table_signature=True)
    assert set(whole.data) == {"action", "step"}
    assert type(whole.data["step"]) is Step
    np.testing.assert_array_equal(whole.data["action"], [3])
    np.testing.assert_array_equal(whole.data["step"].obs, [[1.0, 2.0]])
    assert whole.data["step"].obs.dtype == np.float32
    np.testing.assert_array_equal(whole.data["step"].reward, [0.5])

    ((step,),) = client.sample("signed", unpack_as_table_signature=True)
    assert type(step.data["step"]) is Step
    assert step.data["action"].shape == ()
    assert step.data["action"] == 3
    np.testing.assert_array_equal(step.data["step"].obs, [1.0, 2.0])


def test_unpack_without_a_signature_keeps_data_flat(client: resound.Client) -> None:
    client.insert({"b": 1, "a": 2}, priorities={"fifo": 1.0})
    (sample,) = client.sample("fifo", emit_timesteps=False, unpack_as_table_signature=True)
    assert [int(c[0]) for c in sample.data] == [2, 1]  # sorted keys: a, b


def test_sample_timeout_on_an_empty_table_leaves_nothing_queued(
    server: resound.Server, client: resound.Client
) -> None:
    with pytest.raises(resound.DeadlineExceededError):
        next(client.sample("uniform", timeout=0.01))
    assert counters(server, "uniform")["waiting_samples"] == 0
    # No sample request of the timed-out call is left to take this item.
    client.insert(7, priorities={"uniform": 1.0})
    assert counters(server, "uniform")["samples"] == 0
    (sample,) = client.sample("uniform", emit_timesteps=False, timeout=5.0)
    np.testing.assert_array_equal(sample.data[0], [7])


def test_sample_waits_for_an_insert_without_timeout(
    server: resound.Server, client: resound.Client
) -> None:
    blocked = Background(lambda: list(client.sample("queue", 2, emit_timesteps=False)))
    for value in (5, 6):
        wait_until(lambda: counters(server, "queue")["waiting_samples"] == 1, "sample waits")
        client.insert(value, priorities={"queue": 1.0})
    samples = blocked.value()
    assert [int(s.data[0][0]) for s in samples] == [5, 6]


# Timeouts past a year wait forever; from about 7.4e9 s on gRPC's deadlines
# overflow (and Python's lock waits from 9.2e9 s).
HUGE_TIMEOUTS = [8e9, 1e10, 1e300, math.inf]


def waits(server: resound.Server, table: str, kind: str, call: Background) -> None:
    """Returns once ``call`` waits for the rate limiter of ``table`` (kind
    "samples" or "inserts"); fails at once if it ended instead."""
    wait_until(
        lambda: call.done() or counters(server, table)[f"waiting_{kind}"] == 1, f"{kind} wait"
    )
    if call.done():
        call.value()  # its error, if it raised
        raise AssertionError("the call ended instead of waiting")


@pytest.mark.parametrize("timeout", HUGE_TIMEOUTS)
def test_timeouts_past_a_year_wait_forever_on_both_transports(serve, timeout: float) -> None:
    server, client = serve(resound.Table.queue("queue", 1))
    assert list(client.server_info(timeout=timeout)) == ["queue"]
    assert list(client.server_infos(timeout=timeout).values())[0].keys() == {"queue"}

    sampled = Background(
        lambda: list(client.sample("queue", emit_timesteps=False, timeout=timeout))
    )
    waits(server, "queue", "samples", sampled)
    client.insert(1, priorities={"queue": 1.0}, timeout=timeout)
    assert [int(s.data[0][0]) for s in sampled.value()] == [1]

    batch = Background(client.sample_batch, "queue", 1, timeout=timeout)
    waits(server, "queue", "samples", batch)
    client.insert(2, priorities={"queue": 1.0}, timeout=timeout)
    np.testing.assert_array_equal(batch.value().data[0], [[2]])

    # Inserts into the full queue wait too: the client's and a writer's flush.
    client.insert(3, priorities={"queue": 1.0})
    inserted = Background(client.insert, 4, priorities={"queue": 1.0}, timeout=timeout)
    waits(server, "queue", "inserts", inserted)
    with client.sample_batches("queue", 1, num_batches=1, timeout=timeout) as batches:
        np.testing.assert_array_equal(next(batches).data[0], [[3]])
    inserted.value()
    # (Not a context manager: a writer closed with its item refused would
    # wait for room forever.)
    writer = client.trajectory_writer(1)
    writer.append([np.int64(5)])
    writer.create_item("queue", 1.0, [writer.history[0][-1:]])
    flushed = Background(writer.flush, timeout_ms=timeout * 1000)
    waits(server, "queue", "inserts", flushed)
    (sample,) = client.sample("queue", emit_timesteps=False, timeout=timeout)
    assert int(sample.data[0][0]) == 4
    flushed.value()
    writer.close()
    assert [int(s.data[0][0]) for s in client.sample("queue", emit_timesteps=False)] == [5]


# --- sample_batch


def test_sample_batch_stacks_items(client: resound.Client) -> None:
    client.insert({"obs": np.ones((2, 3), np.float32), "act": 4}, priorities={"uniform": 3.0})
    batch = client.sample_batch("uniform", batch_size=5)
    assert isinstance(batch, resound.ReplaySample)
    act, obs = batch.data
    assert obs.shape == (5, 1, 2, 3)
    assert obs.dtype == np.float32
    assert act.shape == (5, 1)
    np.testing.assert_array_equal(act, np.full((5, 1), 4))
    info = batch.info
    assert isinstance(info, resound.SampleInfo)
    assert [a.dtype for a in info] == [np.dtype(d) for d in ("u8", "f8", "i8", "f8", "i4")]
    assert list(resound.SampleInfo.dtypes()) == [a.dtype for a in info]
    assert all(a.shape == (5,) for a in info)
    np.testing.assert_array_equal(info.times_sampled, [1, 2, 3, 4, 5])
    np.testing.assert_array_equal(info.priority, np.full(5, 3.0))
    np.testing.assert_array_equal(info.table_size, np.full(5, 1))
    np.testing.assert_array_equal(info.probability, np.full(5, 1.0))
    assert len(set(info.key.tolist())) == 1


def test_sample_batch_of_trajectories_and_squeezed_columns(client: resound.Client) -> None:
    write_trajectory(client, "fifo", length=3)
    batch = client.sample_batch("fifo", 4)
    r, x = batch.data
    assert x.shape == (4, 3, 2)
    assert r.shape == (4,)  # squeezed: no time axis
    np.testing.assert_array_equal(x[2], [[0, 0], [1, 1], [2, 2]])
    np.testing.assert_array_equal(r, [2.0] * 4)


def test_sample_batch_unpacks_as_table_signature(client: resound.Client) -> None:
    for action in range(3):
        data = {"action": action, "step": Step(np.full(2, action, np.float32), 0.5 * action)}
        client.insert(data, priorities={"signed": 1.0})
    batch = client.sample_batch("signed", 3, unpack_as_table_signature=True)
    assert batch.data["action"].shape == (3, 1)
    assert type(batch.data["step"]) is Step
    assert batch.data["step"].obs.shape == (3, 1, 2)
    assert batch.data["step"].reward.shape == (3, 1)


def test_sample_batch_timeout_with_no_sample_raises(
    server: resound.Server, client: resound.Client
) -> None:
    with pytest.raises(resound.DeadlineExceededError):
        client.sample_batch("queue", 4, timeout=0.02)
    client.insert(1, priorities={"queue": 1.0})
    assert server.table("queue").info.current_size == 1  # not taken by the timed-out call
    assert counters(server, "queue")["samples"] == 0


def test_sample_batch_timeout_after_some_samples_returns_them(
    server: resound.Server, client: resound.Client
) -> None:
    for value in (10, 11):
        client.insert(value, priorities={"queue": 1.0})
    batch = client.sample_batch("queue", 5, timeout=0.05)
    np.testing.assert_array_equal(batch.data[0], [[10], [11]])
    assert batch.info.key.shape == (2,)
    client.insert(12, priorities={"queue": 1.0})
    assert server.table("queue").info.current_size == 1


def test_sample_batch_waits_until_the_batch_is_full(
    server: resound.Server, client: resound.Client
) -> None:
    blocked = Background(client.sample_batch, "queue", 3)
    for value in range(3):
        wait_until(lambda: counters(server, "queue")["waiting_samples"] == 1, "batch waits")
        client.insert(value, priorities={"queue": 1.0})
    batch = blocked.value()
    np.testing.assert_array_equal(batch.data[0], [[0], [1], [2]])


def test_sample_batch_with_unequal_shapes_raises(client: resound.Client) -> None:
    client.insert(np.zeros(2), priorities={"queue": 1.0})
    client.insert(np.zeros(3), priorities={"queue": 1.0})
    with pytest.raises(ValueError, match="different shapes"):
        client.sample_batch("queue", 2)


def test_sample_batch_with_unequal_dtypes_raises(client: resound.Client) -> None:
    # numpy would promote silently (uint64 and int64 to float64, losing digits).
    client.insert(np.uint64(2**63 + 1), priorities={"queue": 1.0})
    client.insert(np.int64(-1), priorities={"queue": 1.0})
    with pytest.raises(ValueError, match="different dtypes"):
        client.sample_batch("queue", 2)


def test_sample_batch_with_unequal_dtypes_across_waits_raises(
    server: resound.Server, client: resound.Client
) -> None:
    # The batch is taken in two parts (the second after a wait), then joined.
    blocked = Background(client.sample_batch, "queue", 2)
    for value in (np.uint64(2**63 + 1), np.int64(-1)):
        wait_until(lambda: counters(server, "queue")["waiting_samples"] == 1, "batch waits")
        client.insert(value, priorities={"queue": 1.0})
    error = blocked.raised(ValueError)
    assert "different dtypes" in str(error)


def test_sample_batch_stacks_strings_of_different_widths(client: resound.Client) -> None:
    client.insert(np.array([b"ab"]), priorities={"queue": 1.0})
    client.insert(np.array([b"abcde"]), priorities={"queue": 1.0})
    batch = client.sample_batch("queue", 2)
    assert batch.data[0].tolist() == [[[b"ab"]], [[b"abcde"]]]


@pytest.mark.parametrize("size", [0, -1, 2.0])
def test_sample_batch_checks_batch_size(client: resound.Client, size: object) -> None:
    with pytest.raises(ValueError, match="batch_size"):
        client.sample_batch("uniform", size)  # type: ignore[arg-type]


# --- sample_batches


def test_sample_batches_yields_num_batches(server: resound.Server, client: resound.Client) -> None:
    client.insert(np.arange(2), priorities={"uniform": 1.0})
    with client.sample_batches("uniform", 4, num_batches=3) as batches:
        got = list(batches)
    assert len(got) == 3
    assert all(b.data[0].shape == (4, 1, 2) for b in got)
    assert counters(server, "uniform")["samples"] == 12
    with pytest.raises(StopIteration):
        next(batches)


def test_sample_batches_prefetches_in_the_background(
    server: resound.Server, client: resound.Client
) -> None:
    client.insert(1, priorities={"uniform": 1.0})
    batches = client.sample_batches("uniform", 2, prefetch=2)
    try:
        # Without any next(): the thread fills the queue (2 batches) and holds a third.
        wait_until(lambda: counters(server, "uniform")["samples"] >= 4, "prefetching")
        assert counters(server, "uniform")["samples"] <= 6
        assert next(batches).info.key.shape == (2,)
    finally:
        batches.close()


def test_close_stops_a_thread_blocked_on_an_empty_table(
    server: resound.Server, client: resound.Client
) -> None:
    batches = client.sample_batches("queue", 2)
    wait_until(lambda: counters(server, "queue")["waiting_samples"] == 1, "the thread waits")
    start = time.monotonic()
    batches.close()
    assert time.monotonic() - start < 2.0
    assert not batches._thread.is_alive()
    assert counters(server, "queue")["waiting_samples"] == 0
    with pytest.raises(StopIteration):
        next(batches)
    batches.close()  # idempotent
    client.insert(1, priorities={"queue": 1.0})
    assert server.table("queue").info.current_size == 1  # nobody sampled it


def test_close_wakes_a_consumer_blocked_in_next_on_another_thread(
    server: resound.Server, client: resound.Client
) -> None:
    batches = client.sample_batches("queue", 1)
    consumer = Background(next, batches)
    wait_until(lambda: counters(server, "queue")["waiting_samples"] == 1, "the thread waits")
    batches.close()
    consumer.raised(StopIteration)


def test_sample_batches_errors_reach_the_consumer(server: resound.Server) -> None:
    client = server.in_process_client()
    with client.sample_batches("queue", 1, timeout=0.01) as batches:
        with pytest.raises(resound.DeadlineExceededError):
            next(batches)
        with pytest.raises(StopIteration):
            next(batches)
    batches = client.sample_batches("queue", 1)
    wait_until(lambda: counters(server, "queue")["waiting_samples"] == 1, "the thread waits")
    server.stop()
    consumer = Background(next, batches)
    consumer.raised(resound.CancelledError)
    batches.close()


def test_sample_batches_checks_arguments(client: resound.Client) -> None:
    for kwargs in ({"num_batches": 0}, {"prefetch": 0}, {"timeout": -1.0}):
        with pytest.raises(ValueError):
            client.sample_batches("uniform", 1, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="batch_size"):
        client.sample_batches("uniform", 0)


# --- priorities


def test_mutate_priorities_updates_deletes_and_ignores_missing_keys(
    server: resound.Server, client: resound.Client
) -> None:
    for value in range(4):
        client.insert(value, priorities={"prio": 1.0})
    k0, k1, k2, k3 = keys(server, "prio")
    missing = max(k0, k1, k2, k3) + 1
    client.mutate_priorities("prio", updates={k0: 5.0, missing: 2.0}, deletes=[k1, missing])
    assert priorities_by_key(server, "prio") == {k0: 5.0, k2: 1.0, k3: 1.0}
    # Deletes go first: a key both deleted and updated is gone.
    client.mutate_priorities("prio", updates={k2: 3.0}, deletes=[k2])
    assert priorities_by_key(server, "prio") == {k0: 5.0, k3: 1.0}
    client.mutate_priorities("prio")  # nothing to do
    info = server.table("prio").info
    assert info.current_size == 2
    assert info.rate_limiter_info.delete_stats.completed == 2


def test_mutate_priorities_takes_one_shot_iterators(serve: Any) -> None:
    # A generator of deletes and a map of update pairs, read once by the
    # client whatever its transport does with them (a fallback from the
    # same-host socket to gRPC sends the call again).
    server, client = serve(*tables())
    for value in range(4):
        client.insert(value, priorities={"prio": 1.0})
    k0, k1, k2, k3 = keys(server, "prio")
    client.mutate_priorities(
        "prio",
        updates=map(lambda key: (key, 7.0), [k0]),
        deletes=(key for key in (k1, k2)),
    )
    assert priorities_by_key(server, "prio") == {k0: 7.0, k3: 1.0}


def test_mutate_priorities_reads_every_form_alike_on_every_transport(serve: Any) -> None:
    # A tuple of two (key, priority) pairs is two pairs (keys come as arrays
    # to mean (keys, priorities)); any mapping is {key: priority}. gRPC's
    # client once read the first as (keys, priorities): [k0, 0.5] as keys.
    server, client = serve(*tables())
    for value in range(3):
        client.insert(value, priorities={"prio": 1.0})
    k0, k1, k2 = keys(server, "prio")
    client.mutate_priorities("prio", ((k0, 0.5), (k1, 0.25)))
    assert priorities_by_key(server, "prio") == {k0: 0.5, k1: 0.25, k2: 1.0}
    client.mutate_priorities("prio", types.MappingProxyType({k2: 3.0}))
    client.mutate_priorities("prio", (np.array([k0]), np.array([2.0])))
    assert priorities_by_key(server, "prio") == {k0: 2.0, k1: 0.25, k2: 3.0}


@pytest.mark.parametrize(
    ("updates", "deletes", "message"),
    [
        ({"a": 1.0}, None, r"updates key must be an integer in \[0, 2\*\*64\), got 'a'"),
        ({-1: 1.0}, None, r"updates key must be an integer in \[0, 2\*\*64\), got -1"),
        ({1: "x"}, None, "updates priority must be a number, got 'x'"),
        ([1, 2], None, r"updates must be a dict \{key: priority\}, a pair of arrays"),
        (None, ["a"], r"deletes key must be an integer in \[0, 2\*\*64\), got 'a'"),
    ],
)
def test_mutate_priorities_names_bad_keys_and_priorities_on_every_transport(
    serve: Any, updates: Any, deletes: Any, message: str
) -> None:
    server, client = serve(*tables())
    client.insert(0, priorities={"prio": 1.0})
    (k0,) = keys(server, "prio")
    with pytest.raises(ValueError, match=message):
        client.mutate_priorities("prio", updates, deletes)
    assert priorities_by_key(server, "prio") == {k0: 1.0}


def test_prioritized_sampling_follows_updated_priorities(
    server: resound.Server, client: resound.Client
) -> None:
    client.insert(0, priorities={"prio": 1.0})
    client.insert(1, priorities={"prio": 1.0})
    k0, k1 = keys(server, "prio")
    client.update_priorities("prio", {k0: 0.0})
    batch = client.sample_batch("prio", 20)
    assert set(batch.info.key.tolist()) == {k1}
    np.testing.assert_array_equal(batch.info.probability, np.ones(20))
    np.testing.assert_array_equal(batch.data[0][:, 0], np.ones(20))


def test_priorities_accept_numpy_keys_and_values(
    server: resound.Server, client: resound.Client
) -> None:
    for value in range(3):
        client.insert(value, priorities={"prio": 1.0})
    item_keys = np.array(keys(server, "prio"), np.uint64)
    values = np.array([2, 3, 4], np.float32)
    client.update_priorities("prio", dict(zip(item_keys, values, strict=True)))
    assert priorities_by_key(server, "prio") == dict(
        zip(item_keys.tolist(), [2.0, 3.0, 4.0], strict=True)
    )
    client.mutate_priorities("prio", deletes=item_keys[:2])
    assert priorities_by_key(server, "prio") == {int(item_keys[2]): 4.0}


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0])
def test_mutate_priorities_is_all_or_nothing(
    server: resound.Server, client: resound.Client, bad: float
) -> None:
    for value in range(3):
        client.insert(value, priorities={"prio": 1.0})
    k0, k1, k2 = keys(server, "prio")
    with pytest.raises(ValueError):
        client.mutate_priorities("prio", updates={k0: 4.0, k1: bad}, deletes=[k2])
    assert priorities_by_key(server, "prio") == {k0: 1.0, k1: 1.0, k2: 1.0}
    with pytest.raises(ValueError):
        client.update_priorities("prio", {k0: 4.0, k1: bad})
    assert priorities_by_key(server, "prio") == {k0: 1.0, k1: 1.0, k2: 1.0}
    assert server.table("prio").info.rate_limiter_info.delete_stats.completed == 0


def test_non_prioritized_tables_accept_negative_but_not_infinite_priorities(
    server: resound.Server, client: resound.Client
) -> None:
    client.insert(0, priorities={"uniform": 1.0})
    (key,) = keys(server, "uniform")
    client.update_priorities("uniform", {key: -2.0})
    assert priorities_by_key(server, "uniform") == {key: -2.0}
    for bad in (math.inf, math.nan):
        with pytest.raises(ValueError):
            client.update_priorities("uniform", {key: bad})
    assert priorities_by_key(server, "uniform") == {key: -2.0}


def test_deleting_from_a_full_queue_does_not_make_room(
    server: resound.Server, client: resound.Client
) -> None:
    # Reverb's quirk (docs/semantics.md §4.4): the queue limiter counts
    # samples, not the size, so a delete leaves inserts blocked until a
    # sample happens.
    for value in range(10):
        client.insert(value, priorities={"queue": 1.0})
    table = server.table("queue")
    assert not table.can_insert(1)
    client.mutate_priorities("queue", deletes=keys(server, "queue")[:1])
    assert table.info.current_size == 9
    assert table.info.rate_limiter_info.delete_stats.completed == 1
    assert not table.can_insert(1)
    np.testing.assert_array_equal(client.sample_batch("queue", 1).data[0], [[1]])
    assert table.can_insert(1)


# --- reset and server_info


def test_reset_empties_the_table_and_zeroes_the_counters(
    server: resound.Server, client: resound.Client
) -> None:
    for value in range(3):
        client.insert(value, priorities={"uniform": 1.0})
    client.sample_batch("uniform", 4)
    client.mutate_priorities("uniform", deletes=keys(server, "uniform")[:1])
    client.reset("uniform")
    info = client.server_info()["uniform"]
    assert info.current_size == 0
    assert info.num_episodes == 0
    assert info.num_unique_samples == 0
    assert info.memory_bytes == 0
    stats = info.rate_limiter_info
    assert (stats.insert_stats.completed, stats.sample_stats.completed) == (0, 0)
    assert stats.delete_stats.completed == 0
    client.insert(9, priorities={"uniform": 1.0})  # the table still works
    np.testing.assert_array_equal(client.sample_batch("uniform", 1).data[0], [[9]])


def test_server_info_reports_every_table(server: resound.Server, client: resound.Client) -> None:
    info = client.server_info()
    assert list(info) == ["uniform", "prio", "fifo", "queue", "signed"]
    assert all(isinstance(v, resound.TableInfo) for v in info.values())
    assert info["signed"].signature is SIGNATURE
    assert info["uniform"].signature is None
    assert info["prio"].sampler_options == selectors.Prioritized(1.0)
    assert info["queue"].max_times_sampled == 1
    assert client.server_info(timeout=1)["uniform"].current_size == 0
    with pytest.raises(ValueError, match="timeout"):
        client.server_info(timeout=-1)


def test_server_info_counters(client: resound.Client) -> None:
    client.insert(np.zeros(64, np.float32), priorities={"uniform": 1.0, "fifo": 1.0})
    client.insert(np.zeros(64, np.float32), priorities={"uniform": 1.0})
    client.sample_batch("uniform", 5)
    info = client.server_info()
    uniform = info["uniform"]
    assert uniform.current_size == 2
    assert uniform.num_episodes == 2
    assert uniform.rate_limiter_info.insert_stats.completed == 2
    assert uniform.rate_limiter_info.sample_stats.completed == 5
    assert uniform.memory_bytes >= 2 * 64 * 4
    assert info["fifo"].current_size == 1
    assert 0 < info["fifo"].memory_bytes < uniform.memory_bytes
    assert info["prio"].memory_bytes == 0


def test_server_info_follows_the_tables_between_calls(
    server: resound.Server, client: resound.Client
) -> None:
    # Over gRPC the server builds what never changes once: each call must
    # still report the counters of that moment, all of them as the table does.
    before = client.server_info()
    client.insert(np.zeros(8, np.float32), priorities={"uniform": 1.0, "fifo": 1.0})
    client.sample_batch("uniform", 3)
    after = client.server_info()
    for name in ("uniform", "fifo", "signed", "queue"):
        assert after[name] == server.table(name).info, name
    assert (before["uniform"].current_size, after["uniform"].current_size) == (0, 1)
    assert after["uniform"].rate_limiter_info.sample_stats.completed == 3
    assert after["fifo"].num_chunks == 1 and after["queue"].num_chunks == 0


def test_blocked_insert_times_out_and_is_withdrawn(
    server: resound.Server, client: resound.Client
) -> None:
    for value in range(10):
        client.insert(value, priorities={"queue": 1.0})
    with pytest.raises(resound.DeadlineExceededError):
        client.insert(99, priorities={"queue": 1.0}, timeout=0.01)
    assert counters(server, "queue")["waiting_inserts"] == 0
    client.sample_batch("queue", 1)  # room for one: the timed-out insert must not take it
    assert server.table("queue").info.current_size == 9
    values = client.sample_batch("queue", 9, timeout=SAFETY).data[0][:, 0]
    np.testing.assert_array_equal(values, np.arange(1, 10))


def test_large_batches_come_from_reused_buffers_never_shared_while_alive(serve: Any) -> None:
    # Batches of 4 x 400 KB come from the core's buffer pool: a buffer let go
    # serves the next batch (no fresh pages to fault in), but a live batch's
    # buffer is never handed out again, and new data overwrites reused memory.
    _, client = serve(
        resound.Table("big", selectors.Fifo(), selectors.Fifo(), 1, rate_limiters.MinSize(1))
    )
    client.insert({"obs": np.full(100_000, 1.0, np.float32)}, priorities={"big": 1.0})
    first = client.sample_batch("big", batch_size=4).data[0]
    second = client.sample_batch("big", batch_size=4).data[0]
    assert first.shape == second.shape == (4, 1, 100_000)
    assert first.ctypes.data != second.ctypes.data
    assert first.flags.writeable and second.flags.writeable
    first[...] = -1.0  # the caller's to change: nothing else sees it
    np.testing.assert_array_equal(second, 1.0)
    reused_address = second.ctypes.data
    # Over the same-host transport the batch is a view of a batch region the
    # client lends the server, reused the same way (not the buffer pool's).
    in_region = isinstance(second.base, getattr(_core, "LocalBatchRegion", ()))
    del second
    if not in_region:
        assert _core.pool_info()["num_cached"] >= 1
    # The only item is replaced by one of 2.0s: the reused buffer holds it.
    client.insert({"obs": np.full(100_000, 2.0, np.float32)}, priorities={"big": 1.0})
    third = client.sample_batch("big", batch_size=4).data[0]
    assert third.ctypes.data == reused_address
    np.testing.assert_array_equal(third, 2.0)
    np.testing.assert_array_equal(first, -1.0)


def test_pooled_empty_checks_shape_and_dtype() -> None:
    array = _core.pooled_empty((3, 2), np.int16)
    assert array.shape == (3, 2) and array.dtype == np.int16 and array.flags.c_contiguous
    with pytest.raises(ValueError, match="shape: extents must be >= 0"):
        _core.pooled_empty((-1, 2), np.float32)
    with pytest.raises(ValueError, match="shape: the array would not fit"):
        _core.pooled_empty((1 << 40, 1 << 40), np.float32)
    with pytest.raises(ValueError, match="dtype: object dtypes are not supported"):
        _core.pooled_empty((2,), object)


# --- closing


def test_a_timeout_is_also_a_timeout_error(client: resound.Client) -> None:
    with pytest.raises(TimeoutError):
        client.sample_batch("uniform", 1, timeout=0.01)


@pytest.fixture
def listening() -> Iterator[resound.Server]:
    with resound.Server(tables()) as server:
        yield server


@pytest.mark.parametrize("transport", ["embedded", "grpc"])
def test_a_closed_client_refuses_its_calls(listening: resound.Server, transport: str) -> None:
    if transport == "embedded":
        client = listening.in_process_client()
    else:
        client = resound.Client(f"localhost:{listening.port}", transport="grpc")
    with client:
        client.insert(1, priorities={"uniform": 1.0})
        assert len(client.sample_batch("uniform", 1, timeout=SAFETY).info.key) == 1
    with pytest.raises(RuntimeError, match=r"is closed \(Client.close\(\) was called\)"):
        client.insert(2, priorities={"uniform": 1.0})
    with pytest.raises(RuntimeError, match="is closed"):
        client.server_info()
    with pytest.raises(RuntimeError, match="is closed"):
        client.trajectory_writer(1)
    client.close()  # idempotent
    assert counters(listening, "uniform")["inserts"] == 1


def test_closing_a_client_ends_its_open_streams_on_the_server(listening: resound.Server) -> None:
    client = resound.Client(f"localhost:{listening.port}", transport="grpc")
    client.insert(1, priorities={"uniform": 1.0})
    client.sample_batch("uniform", 1, timeout=SAFETY)
    assert listening.open_calls > 0  # the insert and sample streams kept open between calls
    client.close()
    wait_until(lambda: listening.open_calls == 0, "the client's streams ended on the server")
