"""resound.TFClient (Reverb's TF ops) against real servers, embedded and over
gRPC: eagerly, inside tf.function and in a TF1 graph run by a Session."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Iterator

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import resound  # noqa: E402
from resound._transport.embedded import EmbeddedTransport  # noqa: E402
from resound._transport.remote import RemoteTransport  # noqa: E402

SAFETY = 20.0  # bound for joins that end at once when the code is correct


def prioritized(name: str) -> resound.Table:
    return resound.Table(
        name,
        resound.selectors.Prioritized(priority_exponent=1),
        resound.selectors.Fifo(),
        1000,
        resound.rate_limiters.MinSize(1),
    )


def max_heap(name: str) -> resound.Table:
    return resound.Table(
        name,
        resound.selectors.MaxHeap(),
        resound.selectors.Fifo(),
        1000,
        resound.rate_limiters.MinSize(1),
    )


Serve = Callable[..., tuple[resound.Client, resound.TFClient]]


@pytest.fixture(params=["embedded", "grpc"])
def serve(request: pytest.FixtureRequest) -> Iterator[Serve]:
    """serve(*tables) -> (resound client, TFClient) of a new server on a
    127.0.0.1 port it picks: the TFClient calls it in-process (embedded) or
    over gRPC. Servers stop at teardown."""
    servers: list[resound.Server] = []

    def make(*tables: resound.Table) -> tuple[resound.Client, resound.TFClient]:
        server = resound.Server(list(tables) or [prioritized("dist"), prioritized("dist2")])
        servers.append(server)
        if request.param == "embedded":
            client = resound.TFClient(f"localhost:{server.port}")
            assert isinstance(client._client._transport.one_server(), EmbeddedTransport)
        else:
            client = resound.TFClient(f"127.0.0.1:{server.port}", transport="grpc")
            assert isinstance(client._client._transport.one_server(), RemoteTransport)
        return server.in_process_client(), client

    yield make
    for server in servers:
        server.stop()


def in_tf_function(build: Callable[[], object]) -> None:
    """Traces ``build`` in a tf.function and runs it (its stateful ops run
    without being returned)."""

    @tf.function
    def run() -> None:
        build()

    run()


def only_item(client: resound.Client, table: str) -> resound.ReplaySample:
    """The table's one item, whole (asserts there is exactly one)."""
    assert client.server_info()[table].current_size == 1
    return next(client.sample(table, emit_timesteps=False))


class TestSample:
    def test_eager_sample_has_the_data_and_info_fields(self, serve):
        writer, client = serve()
        data = [np.arange(81 * 81, dtype=np.float64).reshape(81, 81)]
        writer.insert(data, {"dist": 1.0})
        sample = client.sample("dist", [tf.float64])
        assert isinstance(sample, resound.ReplaySample)
        np.testing.assert_array_equal(sample.data[0].numpy(), data[0])
        assert sample.info.key.dtype == tf.uint64 and int(sample.info.key) != 0
        assert sample.info.probability.dtype == tf.float64 and float(sample.info.probability) == 1
        assert sample.info.table_size.dtype == tf.int64 and int(sample.info.table_size) == 1
        assert sample.info.priority.dtype == tf.float64 and float(sample.info.priority) == 1
        assert sample.info.times_sampled.dtype == tf.int32
        assert int(sample.info.times_sampled) == 1
        assert int(sample.info.key) == only_item(writer, "dist").info.key

    def test_in_tf_function_with_static_info_shapes_and_nested_dtypes(self, serve):
        writer, client = serve()
        step = {"obs": np.full([2, 3], 7, np.int32), "done": np.bool_(True), "text": b"\x00hi"}
        writer.insert(step, {"dist": 2.0})
        seen = {}

        @tf.function
        def sample():
            out = client.sample("dist", {"obs": tf.int32, "done": tf.bool, "text": tf.string})
            seen["specs"] = tf.nest.map_structure(lambda t: (t.dtype, t.shape.rank), out)
            return out

        out = sample()
        specs = seen["specs"]
        assert specs.info == (
            (tf.uint64, 0),
            (tf.float64, 0),
            (tf.int64, 0),
            (tf.float64, 0),
            (tf.int32, 0),
        )
        assert specs.data == {
            "obs": (tf.int32, None),
            "done": (tf.bool, None),
            "text": (tf.string, None),
        }
        np.testing.assert_array_equal(out.data["obs"].numpy(), step["obs"])
        assert out.data["done"].numpy().item() is True
        assert out.data["text"].numpy() == b"\x00hi"
        assert float(out.info.priority) == 2.0
        # A second call of the traced function samples again.
        assert int(sample().info.times_sampled) == 2

    def test_a_sequence_item_gives_its_first_timestep(self, serve):
        writer, client = serve()
        with writer.trajectory_writer(num_keep_alive_refs=3) as trajectory_writer:
            for t in range(3):
                trajectory_writer.append({"x": np.array([t, -t], np.int64), "y": np.float32(t)})
            trajectory_writer.create_item(
                "dist",
                1.0,
                {"x": trajectory_writer.history["x"][:], "y": trajectory_writer.history["y"][:]},
            )
        sample = client.sample("dist", [tf.int64, tf.float32])
        np.testing.assert_array_equal(sample.data[0].numpy(), [0, 0])
        assert float(sample.data[1]) == 0.0

    def test_waits_until_an_item_is_inserted(self, serve):
        writer, client = serve()
        result: dict[str, object] = {}

        def sample_in_thread():
            result["sample"] = tf.function(lambda: client.sample("dist", [tf.int64]))()

        thread = threading.Thread(target=sample_in_thread, daemon=True)
        thread.start()
        writer.insert([np.array([4, 5, 6])], {"dist": 1.0})
        thread.join(SAFETY)
        assert not thread.is_alive()
        np.testing.assert_array_equal(result["sample"].data[0].numpy(), [4, 5, 6])

    def test_dtype_mismatch_is_an_internal_error(self, serve):
        writer, client = serve()
        writer.insert([np.zeros([2, 2])], {"dist": 1.0})
        with pytest.raises(tf.errors.InternalError, match="dtype float64 but data_dtypes"):
            client.sample("dist", [tf.float32])
        # In graph mode TF keeps the message, not the class.
        with pytest.raises(tf.errors.OpError, match="InternalError: Column 0"):
            tf.function(lambda: client.sample("dist", [tf.float32]))()

    def test_wrong_number_of_dtypes_is_an_invalid_argument(self, serve):
        writer, client = serve()
        writer.insert([np.zeros(2), np.ones(3)], {"dist": 1.0})
        with pytest.raises(tf.errors.InvalidArgumentError, match="has 2 columns"):
            client.sample("dist", [tf.float64])
        with pytest.raises(tf.errors.InvalidArgumentError, match="has 2 columns"):
            tf.function(lambda: client.sample("dist", [tf.float64] * 3))()

    def test_unknown_table_is_not_found(self, serve):
        _, client = serve()
        with pytest.raises(tf.errors.NotFoundError, match="invalid"):
            client.sample("invalid", [tf.float64])
        with pytest.raises(tf.errors.OpError, match="NotFoundError"):
            tf.function(lambda: client.sample("invalid", [tf.float64]))()


class TestInsert:
    DATA = [np.array([1, 2, 3], np.int8)]

    def test_checks_tables_and_priorities_when_building_the_op(self, serve):
        _, client = serve()
        data = [tf.constant([1, 2, 3], tf.int8)]
        one = tf.constant([1.0], tf.float64)
        bad = [
            (tf.constant([["dist"]]), one, "tables must be a string tensor of rank 1"),
            (tf.constant("dist"), one, "tables must be a string tensor of rank 1"),
            (tf.constant([1]), one, "tables must be a string tensor of rank 1"),
            (tf.constant(["dist"]), tf.constant([[1.0]], tf.float64), "float64 tensor of rank 1"),
            (tf.constant(["dist"]), tf.constant(1.0, tf.float64), "float64 tensor of rank 1"),
            (tf.constant(["dist"]), tf.constant([1.0], tf.float32), "float64 tensor of rank 1"),
            (tf.constant(["dist", "dist2"]), one, "must have the same shape"),
        ]
        for tables, priorities, message in bad:
            with pytest.raises(ValueError, match=message):
                client.insert(data, tables, priorities)

    def test_eager_insert_into_one_table(self, serve):
        writer, client = serve()
        result = client.insert(
            [tf.constant([1, 2, 3], tf.int8)], tf.constant(["dist"]), tf.constant([1.5], tf.float64)
        )
        assert result is None
        item = only_item(writer, "dist")
        assert item.info.priority == 1.5
        # One timestep: a time axis of length 1, as Reverb's insert op writes.
        np.testing.assert_array_equal(item.data[0], [[1, 2, 3]])
        assert item.data[0].dtype == np.int8
        assert writer.server_info()["dist2"].current_size == 0

    def test_in_tf_function_into_several_tables_with_their_priorities(self, serve):
        writer, client = serve()

        @tf.function
        def insert(value):
            client.insert(
                {"a": value, "b": tf.constant(b"s")},
                tf.constant(["dist", "dist2", "dist2"]),
                tf.constant([1.0, 2.0, 3.0], tf.float64),
            )

        insert(tf.constant([7.0, 8.0]))
        assert writer.server_info()["dist"].current_size == 1
        assert writer.server_info()["dist2"].current_size == 2  # named twice: two items
        item = only_item(writer, "dist")
        assert item.info.priority == 1.0
        np.testing.assert_array_equal(item.data[0], [[7.0, 8.0]])
        assert item.data[1].tolist() == [b"s"]
        priorities = sorted(
            s.info.priority for s in writer.sample("dist2", 20, emit_timesteps=False)
        )
        assert set(priorities) == {2.0, 3.0}

    def test_sampled_back_by_the_tf_client(self, serve):
        _, client = serve()
        client.insert(
            [tf.constant([1, 2, 3], tf.int8)], tf.constant(["dist"]), tf.constant([1.0], tf.float64)
        )
        sample = tf.function(lambda: client.sample("dist", [tf.int8]))()
        np.testing.assert_array_equal(sample.data[0].numpy(), [1, 2, 3])

    def test_unknown_table_is_not_found(self, serve):
        _, client = serve()
        with pytest.raises(tf.errors.NotFoundError, match="nope"):
            client.insert([tf.constant(1)], tf.constant(["nope"]), tf.constant([1.0], tf.float64))

    def test_tf1_graph_and_session(self, serve):
        writer, client = serve()
        with tf.Graph().as_default():
            insert_op = client.insert(
                [tf.constant([1, 2, 3], tf.int8)],
                tf.constant(["dist", "dist2"]),
                tf.constant([1.0, 2.0], tf.float64),
            )
            samples = [client.sample("dist", [tf.int8]), client.sample("dist2", [tf.int8])]
            with tf.compat.v1.Session() as session:
                assert session.run(insert_op) is None
                for sample in samples:
                    got = session.run(sample)
                    np.testing.assert_array_equal(got.data[0], [1, 2, 3])
        assert writer.server_info()["dist2"].current_size == 1


class TestUpdatePriorities:
    @pytest.mark.parametrize("mode", ["eager", "tf.function"])
    def test_the_new_priority_is_the_one_sampled(self, serve, mode):
        writer, client = serve(max_heap("heap"))
        for i in range(4):
            writer.insert([np.array([i], np.uint32)], {"heap": float(i)})
        # The max-heap samples the item of the highest priority.
        top = next(writer.sample("heap", emit_timesteps=False))
        assert top.data[0].tolist() == [[3]] and top.info.priority == 3.0

        def update():
            return client.update_priorities(
                tf.constant("heap"),
                tf.constant([top.info.key], tf.uint64),
                tf.constant([-1.0], tf.float64),
            )

        if mode == "eager":
            assert update() is None
        else:
            # The op runs as a stateful op of the function (returned, as in
            # Reverb, for control dependencies).
            ops = []
            tf.function(lambda: ops.append(update()))()
            assert isinstance(ops[0], tf.Operation)
        new_top = next(writer.sample("heap", emit_timesteps=False))
        assert new_top.data[0].tolist() == [[2]] and new_top.info.priority == 2.0
        priorities = {
            s.info.key: s.info.priority for s in writer.sample("heap", 4, emit_timesteps=False)
        }
        assert top.info.key not in priorities  # never on top again

    def test_prioritized_probability_follows_the_update(self, serve):
        writer, client = serve()
        for i in range(4):
            writer.insert([np.array([i], np.uint32)], {"dist": 1.0})
        update_key = next(writer.sample("dist", emit_timesteps=False)).info.key
        in_tf_function(
            lambda: client.update_priorities(
                "dist", tf.constant([update_key], tf.uint64), tf.constant([3.0], tf.float64)
            )
        )
        # Priority 3 against three of 1: sampled with probability 0.5.
        for sample in writer.sample("dist", 1000, emit_timesteps=False):
            if sample.info.key == update_key:
                assert sample.info.priority == 3.0
                assert sample.info.probability == 0.5
                break
        else:
            pytest.fail("the updated item was never sampled")

    def test_missing_keys_are_ignored(self, serve):
        writer, client = serve()
        writer.insert([np.zeros(1)], {"dist": 1.0})
        key = only_item(writer, "dist").info.key
        missing = (key + 1) % 2**64
        client.update_priorities("dist", [missing, key], [5.0, 4.0])
        assert only_item(writer, "dist").info.priority == 4.0

    def test_keys_and_priorities_of_different_lengths(self, serve):
        _, client = serve()
        keys = tf.constant([1, 2], tf.uint64)
        priorities = tf.constant([1.0], tf.float64)
        with pytest.raises(tf.errors.InvalidArgumentError, match="do not match in shape"):
            client.update_priorities(tf.constant("dist"), keys, priorities)
        with pytest.raises(tf.errors.InvalidArgumentError, match="do not match in shape"):
            in_tf_function(lambda: client.update_priorities("dist", keys, priorities))

    def test_keys_of_rank_two(self, serve):
        _, client = serve()
        with pytest.raises(tf.errors.InvalidArgumentError, match="must be of rank 1"):
            client.update_priorities(
                "dist", tf.constant([[1]], tf.uint64), tf.constant([[1.0]], tf.float64)
            )

    def test_a_negative_priority_of_a_prioritized_table(self, serve):
        writer, client = serve()
        writer.insert([np.zeros(1)], {"dist": 1.0})
        key = only_item(writer, "dist").info.key
        with pytest.raises(tf.errors.InvalidArgumentError, match="priority"):
            client.update_priorities("dist", [key], [-1.0])
        assert only_item(writer, "dist").info.priority == 1.0


def test_learner_step_in_tf_function_samples_and_writes_priorities_back(serve):
    writer, client = serve()
    for i in range(5):
        writer.insert({"obs": np.full([3], i, np.float32)}, {"dist": 1.0})

    @tf.function
    def learner_step():
        sample = client.sample("dist", {"obs": tf.float32})
        priority = tf.reduce_sum(tf.cast(sample.data["obs"], tf.float64)) + 10.0
        client.update_priorities(
            "dist", tf.reshape(sample.info.key, [1]), tf.reshape(priority, [1])
        )
        return sample.info.key, sample.data["obs"]

    expected = {}
    for _ in range(10):
        key, obs = learner_step()
        expected[int(key)] = float(np.sum(obs.numpy())) + 10.0
    infos = {s.info.key: s.info.priority for s in writer.sample("dist", 200, emit_timesteps=False)}
    for key, priority in expected.items():
        assert infos[key] == priority


def test_clients_with_a_shared_name_share_one_connection():
    first = resound.TFClient("localhost:1", shared_name="learner")
    second = resound.TFClient("localhost:1", shared_name="learner")
    other = resound.TFClient("localhost:1")
    assert first._client is second._client
    assert other._client is not first._client
    assert first.server_address == "localhost:1"


def test_imports_without_tensorflow_and_says_how_to_get_it():
    code = (
        "import sys; sys.modules['tensorflow'] = None\n"
        "import resound\n"
        "client = resound.TFClient('localhost:1')\n"
        "try:\n"
        "    client.sample('t', [])\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=SAFETY
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1
    assert all("pip install tensorflow" in line for line in lines)
