"""Reverb's TrajectoryDataset and TimestepDataset on resound: tf.data.Datasets
of sampled items, over a server in this process (called directly) and one in
another process (gRPC on 127.0.0.1), as Acme's learners use them."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import resound  # noqa: E402
from resound import ReplaySample, SampleInfo  # noqa: E402

SAFETY = 60.0

# The tables of every test server, built from this source in the test process
# (embedded) or in a server process (gRPC), so both hold the same tables.
TABLES_SOURCE = """
def make_tables(resound):
    spec = resound.TensorSpec
    return [
        resound.Table('prioritized', resound.selectors.Prioritized(1.0),
                      resound.selectors.Fifo(), 1000, resound.rate_limiters.MinSize(1)),
        resound.Table.queue('queue', 1000),
        resound.Table('signed', resound.selectors.Uniform(), resound.selectors.Fifo(), 1000,
                      resound.rate_limiters.MinSize(1),
                      signature={'obs': spec((None, 3), 'float32'), 'last': spec((), 'int64')}),
    ]
"""

SERVER_SCRIPT = (
    TABLES_SOURCE
    + """
import sys
import resound
server = resound.Server(make_tables(resound))
print(server.port, flush=True)
sys.stdin.read()
server.stop()
"""
)


def make_tables() -> list[resound.Table]:
    namespace: dict[str, Any] = {}
    exec(TABLES_SOURCE, namespace)
    return namespace["make_tables"](resound)


@pytest.fixture(params=["embedded", "grpc"])
def address(request: Any) -> Iterator[str]:
    """A server's address: in this process (clients call it directly) or in
    a server process of its own (clients use gRPC)."""
    if request.param == "embedded":
        server = resound.Server(make_tables())
        yield f"localhost:{server.port}"
        server.stop()
        return
    process = subprocess.Popen(
        [sys.executable, "-c", SERVER_SCRIPT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        yield f"127.0.0.1:{int(process.stdout.readline())}"
    finally:
        process.stdin.close()
        process.wait(timeout=SAFETY)
        process.stdout.close()


def write_sequences(client: resound.Client, table: str, count: int, length: int = 3) -> None:
    """Items over the last ``length`` steps of one episode: step i has
    obs [i, i+0.5, i+1] and the item's 'last' is the last step's index."""
    with client.trajectory_writer(num_keep_alive_refs=length) as writer:
        for step in range(count + length - 1):
            writer.append({"obs": np.array([step, step + 0.5, step + 1], np.float32), "i": step})
            if writer.episode_steps >= length:
                writer.create_item(
                    table,
                    1.0,
                    {"obs": writer.history["obs"][-length:], "last": writer.history["i"][-1]},
                )
    client_flush_check(client, table, count)


def client_flush_check(client: resound.Client, table: str, count: int) -> None:
    assert client.server_info()[table].current_size == count


def check_sequence(obs: np.ndarray, last: int) -> None:
    """``obs`` is the sequence of steps ending at step ``last``, as written."""
    steps = np.arange(last - len(obs) + 1, last + 1, dtype=np.float32)
    np.testing.assert_array_equal(obs, np.stack([steps, steps + 0.5, steps + 1], axis=1))


DTYPES = {"obs": tf.float32, "last": tf.int64}
SHAPES = {"obs": tf.TensorShape([3, 3]), "last": tf.TensorShape([])}


def trajectory_dataset(address: str, table: str = "prioritized", **kwargs: Any) -> Any:
    kwargs.setdefault("max_in_flight_samples_per_worker", 16)
    return resound.TrajectoryDataset(address, table, DTYPES, SHAPES, **kwargs)


# --- what a dataset is


class Step(NamedTuple):
    obs: Any
    last: Any


def test_a_real_tf_dataset_whose_elements_are_replay_samples():
    dataset = resound.TrajectoryDataset(
        "localhost:1",  # contacted by iterators only
        "table",
        dtypes=Step(tf.float32, [tf.int64, tf.uint8]),
        shapes=Step(tf.TensorShape([None, 3]), [tf.TensorShape([]), tf.TensorShape([2])]),
        max_in_flight_samples_per_worker=4,
    )
    assert isinstance(dataset, tf.data.Dataset)
    assert isinstance(dataset, resound.TrajectoryDataset)
    spec = dataset.element_spec
    assert type(spec) is ReplaySample and type(spec.info) is SampleInfo
    assert spec.info == SampleInfo(
        tf.TensorSpec([], tf.uint64),
        tf.TensorSpec([], tf.float64),
        tf.TensorSpec([], tf.int64),
        tf.TensorSpec([], tf.float64),
        tf.TensorSpec([], tf.int32),
    )
    # Namedtuples are kept, lists become tuples (as Reverb does).
    assert spec.data == Step(
        tf.TensorSpec([None, 3], tf.float32),
        (tf.TensorSpec([], tf.int64), tf.TensorSpec([2], tf.uint8)),
    )


@pytest.mark.parametrize(
    ("argument", "value", "message"),
    [
        ("max_in_flight_samples_per_worker", 0, "must be a positive integer"),
        ("max_in_flight_samples_per_worker", -1, "must be a positive integer"),
        ("num_workers_per_iterator", 0, "positive integer or -1"),
        ("num_workers_per_iterator", -2, "positive integer or -1"),
        ("max_samples_per_stream", 0, "positive integer or -1"),
        ("max_samples_per_stream", -2, "positive integer or -1"),
        ("rate_limiter_timeout_ms", -2, "must be an integer >= -1"),
        ("max_samples", 0, "positive integer or -1"),
        ("max_samples", -3, "positive integer or -1"),
        ("max_samples", 1.5, "must be an integer"),
    ],
)
@pytest.mark.parametrize("dataset_class", ["TrajectoryDataset", "TimestepDataset"])
def test_arguments_out_of_range_raise_value_error(dataset_class, argument, value, message):
    kwargs: dict[str, Any] = {"max_in_flight_samples_per_worker": 1, argument: value}
    with pytest.raises(ValueError, match=f"{argument}.*{message}"):
        getattr(resound, dataset_class)("localhost:1", "t", DTYPES, SHAPES, **kwargs)


def test_arguments_in_range_are_accepted():
    for kwargs in (
        {"num_workers_per_iterator": 1},
        {"max_samples_per_stream": 1},
        {"rate_limiter_timeout_ms": 0},
        {"max_samples": 1},
    ):
        trajectory_dataset("localhost:1", **kwargs)


def test_dtypes_and_shapes_of_different_structures_raise_value_error():
    with pytest.raises(ValueError, match="same structure"):
        resound.TrajectoryDataset("localhost:1", "t", DTYPES, {"obs": tf.TensorShape([3])}, 1)


def test_importable_without_tensorflow_and_constructing_says_what_to_install():
    script = (
        "import sys; sys.modules['tensorflow'] = None\n"
        "import resound, resound.datasets.tf\n"
        "assert 'tensorflow' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
        "try:\n"
        "    resound.TrajectoryDataset('localhost:1', 't', {}, {}, 1)\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=SAFETY
    )
    assert result.returncode == 0, result.stderr
    assert "pip install tensorflow" in result.stdout


# --- sampling


def test_acme_shaped_learner_loop_samples_what_was_written_and_updates_priorities(address):
    client = resound.Client(address)
    write_sequences(client, "prioritized", 6)

    def make_dataset(_: Any) -> Any:  # traced by interleave: built in graph mode
        dataset = trajectory_dataset(address, max_in_flight_samples_per_worker=8)
        return dataset.map(
            lambda sample: resound.ReplaySample(
                info=sample.info,
                data={
                    "obs": tf.ensure_shape(tf.pad(sample.data["obs"], [[0, 1], [0, 0]]), [4, 3]),
                    "last": sample.data["last"],
                },
            )
        )

    dataset = tf.data.Dataset.range(2).interleave(
        make_dataset, cycle_length=2, num_parallel_calls=2, deterministic=False
    )
    dataset = dataset.batch(4, drop_remainder=True).prefetch(2)
    new_priorities: dict[int, float] = {}
    for index, batch in enumerate(dataset.take(3).as_numpy_iterator()):
        assert batch.info.key.dtype == np.uint64 and batch.info.key.shape == (4,)
        assert batch.data["obs"].shape == (4, 4, 3)
        assert set(batch.info.table_size.tolist()) == {6}
        for obs, last in zip(batch.data["obs"], batch.data["last"], strict=True):
            assert 2 <= last <= 7
            check_sequence(obs[:3], int(last))
            np.testing.assert_array_equal(obs[3], 0)  # the padding
        keys, priorities = batch.info.key, np.full(4, 10.0 + index)
        # As Acme's learners write priorities back.
        client.mutate_priorities("prioritized", updates=dict(zip(keys, priorities, strict=True)))
        new_priorities.update(zip(keys.tolist(), priorities.tolist(), strict=True))
    assert new_priorities
    # The table now holds the priorities written back.
    seen = {}
    for sample in trajectory_dataset(address, max_samples=200).as_numpy_iterator():
        seen[int(sample.info.key)] = float(sample.info.priority)
    for key, priority in new_priorities.items():
        if key in seen:
            assert seen[key] == priority
    assert set(new_priorities) & set(seen)
    assert all(priority == 1.0 for key, priority in seen.items() if key not in new_priorities)


def test_built_and_iterated_in_graph_mode(address):
    client = resound.Client(address)
    write_sequences(client, "prioritized", 4)

    @tf.function
    def first_batch() -> Any:
        dataset = trajectory_dataset(address)  # built while tf.function traces
        return next(iter(dataset.batch(5)))

    batch = first_batch()
    assert batch.data["obs"].shape == (5, 3, 3)
    for obs, last in zip(batch.data["obs"].numpy(), batch.data["last"].numpy(), strict=True):
        check_sequence(obs, int(last))

    with tf.Graph().as_default():  # TF1-style, as Reverb's own tests iterate
        dataset = trajectory_dataset(tf.constant(address), table=tf.constant("prioritized"))
        iterator = tf.compat.v1.data.make_initializable_iterator(dataset)
        element = iterator.get_next()
        with tf.compat.v1.Session() as session:
            session.run(iterator.initializer)
            for _ in range(3):
                sample = session.run(element)
                check_sequence(sample.data["obs"], int(sample.data["last"]))
                assert sample.info.table_size == 4


def test_eager_iteration(address):
    client = resound.Client(address)
    write_sequences(client, "prioritized", 3)
    for sample in trajectory_dataset(address).take(5):
        assert sample.info.key.dtype == tf.uint64
        assert sample.info.probability.numpy() == pytest.approx(1 / 3)
        assert sample.info.times_sampled.dtype == tf.int32
        check_sequence(sample.data["obs"].numpy(), int(sample.data["last"]))


def test_timestep_dataset_emits_each_items_steps_in_order(address):
    client = resound.Client(address)
    write_sequences(client, "prioritized", 5)
    dataset = resound.TimestepDataset(
        address,
        "prioritized",
        dtypes={"obs": tf.float32, "last": tf.int64},
        shapes={"obs": tf.TensorShape([3]), "last": tf.TensorShape([])},
        max_in_flight_samples_per_worker=4,
    )
    # 'last' is one value per item, not a column of steps: refused.
    with pytest.raises(tf.errors.InvalidArgumentError, match="timesteps"):
        next(iter(dataset))

    with client.trajectory_writer(num_keep_alive_refs=3) as writer:
        for step in range(3 * 4):
            writer.append({"obs": np.full(3, step, np.float32)})
            if step % 3 == 2:
                writer.create_item("queue", 1.0, {"obs": writer.history["obs"][-3:]})
    steps = resound.TimestepDataset(
        address,
        "queue",
        dtypes={"obs": tf.float32},
        shapes={"obs": tf.TensorShape([3])},
        max_in_flight_samples_per_worker=3,
        rate_limiter_timeout_ms=100,
        num_workers_per_iterator=1,
    )
    rows = list(steps.as_numpy_iterator())
    assert [int(row.data["obs"][0]) for row in rows] == list(range(12))
    keys = [int(row.info.key) for row in rows]
    assert len(set(keys)) == 4
    assert all(len(set(keys[i : i + 3])) == 1 for i in range(0, 12, 3))


def test_rate_limiter_timeout_ends_the_dataset(address):
    client = resound.Client(address)
    # Empty: the first wait times out, the dataset has no elements.
    assert list(trajectory_dataset(address, "queue", rate_limiter_timeout_ms=50)) == []
    write_sequences(client, "queue", 5)
    samples = list(
        trajectory_dataset(
            address, "queue", rate_limiter_timeout_ms=50, num_workers_per_iterator=1
        ).as_numpy_iterator()
    )
    # Each queued item once, in order, then the end of the sequence.
    assert [int(s.data["last"]) for s in samples] == [2, 3, 4, 5, 6]
    for sample in samples:
        check_sequence(sample.data["obs"], int(sample.data["last"]))


def test_batch_gives_the_batches_of_tf_data_batch(address):
    client = resound.Client(address)
    write_sequences(client, "queue", 7)
    dataset = trajectory_dataset(
        address,
        "queue",
        max_in_flight_samples_per_worker=3,
        rate_limiter_timeout_ms=100,
        num_workers_per_iterator=1,  # the table's order, as Reverb asks for FIFO tables
    )
    for drop_remainder in (False, True):
        assert (
            dataset.batch(3, drop_remainder=drop_remainder).element_spec
            == tf.data.Dataset.batch(dataset, 3, drop_remainder=drop_remainder).element_spec
        )
    batches = list(dataset.batch(2).as_numpy_iterator())  # fetched 3 at a time, cut in 2s
    assert [b.data["last"].tolist() for b in batches] == [[2, 3], [4, 5], [6, 7], [8]]
    for batch in batches:
        for obs, last in zip(batch.data["obs"], batch.data["last"], strict=True):
            check_sequence(obs, int(last))
    write_sequences(client, "queue", 5)
    kept = list(dataset.batch(2, drop_remainder=True, num_parallel_calls=2).as_numpy_iterator())
    assert [b.data["last"].tolist() for b in kept] == [[2, 3], [4, 5]]


def test_max_samples_ends_each_iterator(address):
    client = resound.Client(address)
    write_sequences(client, "prioritized", 3)
    dataset = trajectory_dataset(address, max_samples=5)
    batches = list(dataset.batch(2).as_numpy_iterator())
    assert [len(b.info.key) for b in batches] == [2, 2, 1]
    assert len(list(dataset)) == 5  # a new iterator starts again


def test_from_table_signature_samples_items_of_differing_lengths(address):
    client = resound.Client(address)
    with client.trajectory_writer(num_keep_alive_refs=4) as writer:
        for step in range(12):
            writer.append({"obs": np.array([step, step + 0.5, step + 1], np.float32), "i": step})
            length = 1 + step % 4
            if writer.episode_steps >= length:
                writer.create_item(
                    "signed",
                    1.0,
                    {"obs": writer.history["obs"][-length:], "last": writer.history["i"][-1]},
                )
    dataset = resound.TrajectoryDataset.from_table_signature(
        address, "signed", max_in_flight_samples_per_worker=64, get_signature_timeout_secs=10
    )
    assert dataset.element_spec.data == {
        "obs": tf.TensorSpec([None, 3], tf.float32),
        "last": tf.TensorSpec([], tf.int64),
    }
    lengths = set()
    for sample in dataset.take(200).as_numpy_iterator():
        check_sequence(sample.data["obs"], int(sample.data["last"]))
        lengths.add(len(sample.data["obs"]))
    assert lengths == {1, 2, 3, 4}


def test_from_table_signature_needs_a_table_with_a_signature(address):
    with pytest.raises(ValueError, match="Table prioritized at .* does not have a signature"):
        resound.TrajectoryDataset.from_table_signature(address, "prioritized", 10)
    with pytest.raises(
        ValueError,
        match="does not contain any table named missing. Found: prioritized, queue, signed.",
    ):
        resound.TimestepDataset.from_table_signature(address, "missing", 10)


def test_string_columns_come_back_as_bytes(address):
    client = resound.Client(address)
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
        for step in (5, 10, 100):  # strings of different widths
            writer.append({"text": np.array(f"step {step}".encode()), "i": step})
            writer.create_item(
                "prioritized",
                1.0,
                {"text": writer.history["text"][-1:], "i": writer.history["i"][-1]},
            )
    dataset = resound.TrajectoryDataset(
        address,
        "prioritized",
        dtypes={"text": tf.string, "i": tf.int64},
        shapes={"text": tf.TensorShape([1]), "i": tf.TensorShape([])},
        max_in_flight_samples_per_worker=8,
    )
    for batch in dataset.batch(4).take(3).as_numpy_iterator():
        for text, i in zip(batch.data["text"], batch.data["i"], strict=True):
            assert text.tolist() == [f"step {i}".encode()]


def test_a_column_that_does_not_match_the_shapes_is_an_error(address):
    client = resound.Client(address)
    write_sequences(client, "prioritized", 2, length=2)
    with pytest.raises(tf.errors.InvalidArgumentError, match="does not match"):
        next(iter(trajectory_dataset(address)))  # items of 2 steps, shapes say 3


# --- a script that ends with its iterators still running

EXIT_SCRIPT = """
import sys
import tensorflow as tf
import resound
dataset = resound.TrajectoryDataset(
    sys.argv[1], 'queue',
    {'obs': tf.float32, 'last': tf.int64},
    {'obs': tf.TensorShape([3, 3]), 'last': tf.TensorShape([])},
    max_in_flight_samples_per_worker=8)
if sys.argv[2] == 'batched':
    dataset = dataset.batch(4)  # tf.data prefetches this one on a thread of its own
iterator = dataset.as_numpy_iterator()
for _ in range(2):
    next(iterator)
print('sampled', flush=True)
"""


@pytest.mark.parametrize("pipeline", ["batched", "plain"])
def test_a_script_exits_while_its_iterator_is_fetching(address, pipeline):
    # The iterator is alive at exit, and the queue ran dry: its next fetch
    # (a tf.data prefetch thread's, once batched) waits for items. The
    # process must still end, with status 0 (it used to hang, or abort with
    # 'terminate called without an active exception').
    write_sequences(resound.Client(address), "queue", 10)
    result = subprocess.run(
        [sys.executable, "-c", EXIT_SCRIPT, address, pipeline],
        capture_output=True,
        text=True,
        timeout=SAFETY,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "sampled"
    assert "terminate called" not in result.stderr
