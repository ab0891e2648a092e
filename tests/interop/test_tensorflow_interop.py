"""resound beside TensorFlow: tf.TensorSpec signatures, TF tensors as data and
as values checked against specs, tf.convert_to_tensor of samples, and either
import order."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator

import numpy as np
import pytest
import tensorflow as tf

import resound

from helpers.interop import Servers, uniform_table


@pytest.fixture
def make_client() -> Iterator[Callable[..., resound.Client]]:
    servers = Servers()
    yield servers.make_client
    servers.close()


SIGNATURE = {
    "obs": tf.TensorSpec([None, 3], tf.float32, name="obs"),
    "id": tf.TensorSpec([], tf.int64),
}
NESTED_SIGNATURE = {
    "observation": {
        "pixels": tf.TensorSpec([2, 2], tf.uint8),
        "text": tf.TensorSpec([], tf.string),
    },
    "reward": tf.TensorSpec([], tf.float32),
}


def nested_step(i: int) -> dict:
    return {
        "observation": {
            "pixels": tf.fill([2, 2], tf.constant(i, tf.uint8)),
            "text": tf.constant(f"step {i}".encode()),
        },
        "reward": tf.constant(i / 2, tf.float32),
    }


class TestTensorSpecSignature:
    @pytest.mark.parametrize("signature", [SIGNATURE, NESTED_SIGNATURE], ids=["flat", "nested"])
    def test_accepted_and_returned_unchanged(self, make_client, signature):
        client = make_client(uniform_table("t", signature))
        returned = client.server_info()["t"].signature
        assert returned == signature
        assert tf.nest.flatten(returned) == tf.nest.flatten(signature)
        for got, given in zip(tf.nest.flatten(returned), tf.nest.flatten(signature), strict=True):
            assert got is given

    def test_nested_inserts_of_tf_tensors_round_trip(self, make_client):
        client = make_client(uniform_table("t", NESTED_SIGNATURE))
        for i in range(3):
            client.insert(nested_step(i), priorities={"t": 1.0})
        samples = list(client.sample("t", 10, unpack_as_table_signature=True))
        for (step,) in samples:
            i = int(step.data["reward"] * 2)
            assert step.data["observation"]["pixels"].dtype == np.uint8
            np.testing.assert_array_equal(step.data["observation"]["pixels"], np.full((2, 2), i))
            assert step.data["observation"]["text"] == f"step {i}".encode()
            text = tf.convert_to_tensor(step.data["observation"]["text"])
            assert text.dtype == tf.string and text.numpy() == f"step {i}".encode()

    @pytest.mark.parametrize(
        "data",
        [
            {"obs": tf.zeros([3], tf.float64), "id": tf.constant(1, tf.int64)},  # dtype
            {"obs": tf.zeros([4], tf.float32), "id": tf.constant(1, tf.int64)},  # shape
            {"obs": tf.zeros([3]), "id": tf.constant(1, tf.int32)},  # int32 id
            {"obs": tf.zeros([3])},  # a column missing
        ],
        ids=["dtype", "shape", "id-dtype", "missing"],
    )
    def test_mismatching_inserts_are_rejected(self, make_client, data):
        client = make_client(uniform_table("t", SIGNATURE))
        with pytest.raises(ValueError):
            client.insert(data, priorities={"t": 1.0})
        assert client.server_info()["t"].current_size == 0
        client.insert({"obs": tf.zeros([3]), "id": tf.constant(1, tf.int64)}, priorities={"t": 1})
        assert client.server_info()["t"].current_size == 1

    def test_mismatching_nested_inserts_are_rejected(self, make_client):
        client = make_client(uniform_table("t", NESTED_SIGNATURE))
        step = nested_step(1)
        step["observation"]["pixels"] = tf.zeros([2, 2], tf.int32)
        with pytest.raises(ValueError):
            client.insert(step, priorities={"t": 1.0})

    def test_writer_items_are_validated(self, make_client):
        client = make_client(uniform_table("t", SIGNATURE))
        with client.trajectory_writer(5) as writer:
            for i in range(4):
                writer.append({"obs": tf.fill([3], float(i)), "id": tf.constant(i, tf.int64)})
            with pytest.raises(ValueError):  # id must be one step (shape []), not a sequence
                writer.create_item(
                    "t", 1.0, {"obs": writer.history["obs"][-2:], "id": writer.history["id"][-2:]}
                )
            writer.create_item(
                "t", 1.0, {"obs": writer.history["obs"][-4:], "id": writer.history["id"][-1]}
            )
        batch = client.sample_batch("t", 1, unpack_as_table_signature=True)
        np.testing.assert_array_equal(
            batch.data["obs"][0], np.repeat(np.arange(4.0), 3).reshape(4, 3)
        )
        assert batch.data["id"].tolist() == [3]

    def test_unknown_rank_spec_accepts_any_shape(self, make_client):
        client = make_client(uniform_table("t", {"x": tf.TensorSpec(None, tf.float32)}))
        client.insert({"x": tf.zeros([2, 5, 1])}, priorities={"t": 1.0})
        client.insert({"x": tf.constant(1.0)}, priorities={"t": 1.0})
        assert client.server_info()["t"].current_size == 2

    def test_a_tf_tensor_is_not_a_spec(self):
        with pytest.raises(ValueError, match="data, not a spec"):
            uniform_table("t", signature={"obs": tf.zeros([3])})


class TestResoundTensorSpecWithTf:
    def test_is_compatible_with_tf_tensors(self):
        spec = resound.TensorSpec((None, 3), np.float32)
        assert spec.is_compatible_with(tf.zeros((5, 3)))
        assert spec.is_compatible_with(tf.zeros((0, 3)))
        assert not spec.is_compatible_with(tf.zeros((5, 4)))
        assert not spec.is_compatible_with(tf.zeros((3,)))
        assert not spec.is_compatible_with(tf.zeros((5, 3), tf.float64))
        assert resound.TensorSpec((), bytes).is_compatible_with(tf.constant(b"x"))
        assert resound.TensorSpec((2,), np.int32).is_compatible_with(tf.constant([1, 2]))

    def test_is_compatible_with_tf_specs(self):
        spec = resound.TensorSpec((None, 3), np.float32)
        assert spec.is_compatible_with(tf.TensorSpec([7, 3], tf.float32))
        assert spec.is_compatible_with(tf.TensorSpec([None, 3], tf.float32))
        assert not spec.is_compatible_with(tf.TensorSpec([7, 3], tf.int32))

    def test_from_tf_spec(self):
        spec = resound.TensorSpec.from_spec(tf.TensorSpec([None, 3], tf.float32, name="obs"))
        assert spec == resound.TensorSpec((None, 3), np.float32, "obs")
        string = resound.TensorSpec.from_spec(tf.TensorSpec([2], tf.string))
        assert string.dtype.kind == "S" and string.shape == (2,)


class TestTfTensorsInAndOut:
    def test_convert_to_tensor_of_a_batch(self, make_client):
        client = make_client()
        for i in range(6):
            client.insert(
                [np.full((2, 3), i, np.float32), np.int64(i), np.bytes_(b"ab" * i)],
                priorities={"t": 1.0},
            )
        batch = client.sample_batch("t", 10)
        obs, ids, text = (tf.convert_to_tensor(leaf) for leaf in batch.data)
        assert (obs.dtype, ids.dtype, text.dtype) == (tf.float32, tf.int64, tf.string)
        assert obs.shape == (10, 1, 2, 3) and ids.shape == (10, 1) and text.shape == (10, 1)
        np.testing.assert_array_equal(obs.numpy(), batch.data[0])
        tf.debugging.assert_equal(
            obs, tf.cast(ids, tf.float32)[:, :, None, None] * tf.ones_like(obs)
        )
        tf.debugging.assert_equal(tf.strings.length(text), tf.cast(ids * 2, tf.int32))
        key = tf.convert_to_tensor(batch.info.key)
        assert key.dtype == tf.uint64
        np.testing.assert_array_equal(key.numpy(), batch.info.key)
        for field in batch.info:
            np.testing.assert_array_equal(tf.convert_to_tensor(field).numpy(), field)

    def test_convert_to_tensor_of_samples(self, make_client):
        client = make_client()
        client.insert({"a": np.arange(4, dtype=np.int32)}, priorities={"t": 1.0})
        (sample,) = client.sample("t", emit_timesteps=False)
        tensor = tf.convert_to_tensor(sample.data[0])
        tf.debugging.assert_equal(tensor, tf.constant([[0, 1, 2, 3]], tf.int32))

    @pytest.mark.parametrize("convert", ["numpy", "asarray", "tensor"])
    def test_insert_round_trips(self, make_client, convert):
        client = make_client()
        data = [tf.reshape(tf.range(6, dtype=tf.float32), [2, 3]), tf.constant([b"x", b"yz"])]
        if convert == "numpy":
            data = [t.numpy() for t in data]
        elif convert == "asarray":
            data = [np.asarray(t) for t in data]
        client.insert(data, priorities={"t": 1.0})
        (sample,) = client.sample("t", emit_timesteps=False)
        obs, text = sample.data
        # Strings come back as Reverb hands them out: object arrays of bytes.
        assert obs.dtype == np.float32 and text.dtype == object
        np.testing.assert_array_equal(obs[0], np.arange(6, dtype=np.float32).reshape(2, 3))
        assert text[0].tolist() == [b"x", b"yz"]
        assert all(type(value) is bytes for value in text[0])

    @pytest.mark.parametrize("convert", ["numpy", "tensor"])
    def test_trajectory_writer_append_round_trips(self, make_client, convert):
        client = make_client()
        with client.trajectory_writer(3) as writer:
            for i in range(4):
                step = {"obs": tf.fill([2], float(i)), "name": tf.constant(f"s{i}")}
                if convert == "numpy":
                    step = {k: v.numpy() for k, v in step.items()}
                writer.append(step)
                if writer.episode_steps >= 2:
                    writer.create_item(
                        "t",
                        1.0,
                        {"obs": writer.history["obs"][-2:], "name": writer.history["name"][-1]},
                    )
        assert client.server_info()["t"].current_size == 3
        seen = set()
        for sample in client.sample("t", 20, emit_timesteps=False, unpack_as_table_signature=False):
            name, obs = sample.data  # dm-tree order: 'name' before 'obs'
            last = int(name.item()[len(b"s") :])
            seen.add(last)
            np.testing.assert_array_equal(obs, [[last - 1] * 2, [last] * 2])
        assert seen == {1, 2, 3}


@pytest.mark.parametrize(
    "first, second",
    [("tensorflow", "resound"), ("resound", "tensorflow")],
    ids=["tf-first", "resound-first"],
)
def test_import_order(first, second):
    code = f"""
import {first}, {second}
import numpy as np
import tensorflow as tf
import resound
server = resound.Server([resound.Table.queue('q', 10)], listen=False)
client = server.in_process_client()
client.insert([tf.constant([1.0, 2.0])], priorities={{'q': 1.0}})
batch = client.sample_batch('q', 1)
assert tf.reduce_sum(tf.convert_to_tensor(batch.data[0])).numpy() == 3.0
server.stop()
print('ok')
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("ok")


def test_sample_info_tf_dtypes_and_shapes_are_reverbs():
    dtypes = resound.SampleInfo.tf_dtypes()
    assert isinstance(dtypes, resound.SampleInfo)
    assert dtypes == (tf.uint64, tf.float64, tf.int64, tf.float64, tf.int32)
    shapes = resound.SampleInfo.tf_shapes()
    assert all(shape == tf.TensorShape([]) for shape in shapes)
    # Acme builds empty infos this way.
    empty = resound.SampleInfo(*[() for _ in resound.SampleInfo.tf_dtypes()])
    assert empty.key == ()
