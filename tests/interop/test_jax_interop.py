"""resound beside JAX: sampled batches go to jnp.asarray, jax.ShapeDtypeStruct
leaves serve as a table signature, and jax arrays go in as data."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import resound

from helpers.interop import Servers, uniform_table


@pytest.fixture
def make_client() -> Iterator[Callable[..., resound.Client]]:
    servers = Servers()
    yield servers.make_client
    servers.close()


SIGNATURE = {
    "obs": jax.ShapeDtypeStruct((2, 3), jnp.float32),
    "step": jax.ShapeDtypeStruct((), jnp.int32),
}


def fill(client: resound.Client, count: int = 8) -> None:
    for i in range(count):
        client.insert(
            {"obs": np.full((2, 3), i, np.float32), "step": np.int32(i)}, priorities={"t": 1.0}
        )


class TestJnpAsarrayOfSamples:
    def test_batches_convert_and_equal_the_data(self, make_client):
        client = make_client()
        fill(client)
        batch = client.sample_batch("t", 16)
        for array in resound.nest.flatten(batch.data):
            converted = jnp.asarray(array)
            assert isinstance(converted, jax.Array)
            assert converted.dtype == array.dtype and converted.shape == array.shape
            np.testing.assert_array_equal(np.asarray(converted), array)
        # dm-tree order: 'obs' before 'step'; obs rows hold their step number.
        obs, step = (jnp.asarray(leaf) for leaf in batch.data)
        assert obs.shape == (16, 1, 2, 3) and step.shape == (16, 1)
        assert bool(jnp.all(obs == step.astype(jnp.float32)[:, :, None, None]))
        times = jnp.asarray(batch.info.times_sampled)
        assert times.dtype == jnp.int32 and bool(jnp.all(times >= 1))

    def test_jitted_function_of_a_prefetched_batch(self, make_client):
        client = make_client(uniform_table("t", SIGNATURE))
        fill(client)

        @jax.jit
        def mean_obs(data):
            return jnp.mean(data["obs"])

        with client.sample_batches(
            "t", 8, num_batches=2, unpack_as_table_signature=True
        ) as batches:
            for batch in batches:
                assert set(batch.data) == {"obs", "step"}
                expected = batch.data["obs"].mean()
                assert float(mean_obs(batch.data)) == pytest.approx(float(expected))

    def test_samples_convert(self, make_client):
        client = make_client()
        fill(client, 3)
        for (step,) in client.sample("t", 5):
            obs = jnp.asarray(step.data[0])
            assert obs.shape == (2, 3)
            np.testing.assert_array_equal(np.asarray(obs), step.data[0])


class TestShapeDtypeStructSignature:
    def test_accepted_and_returned_unchanged(self, make_client):
        client = make_client(uniform_table("t", SIGNATURE))
        signature = client.server_info()["t"].signature
        assert signature == SIGNATURE
        assert signature["obs"] is SIGNATURE["obs"] and signature["step"] is SIGNATURE["step"]

    def test_matching_inserts_are_stored_and_unpack_as_the_signature(self, make_client):
        client = make_client(uniform_table("t", SIGNATURE))
        client.insert({"obs": jnp.ones((2, 3)), "step": jnp.int32(4)}, priorities={"t": 1.0})
        (sample,) = client.sample("t", emit_timesteps=False, unpack_as_table_signature=True)
        np.testing.assert_array_equal(sample.data["obs"], np.ones((1, 2, 3), np.float32))
        assert sample.data["step"].dtype == np.int32 and sample.data["step"].tolist() == [4]

    @pytest.mark.parametrize(
        "data",
        [
            {"obs": np.ones((2, 3), np.float64), "step": np.int32(1)},  # dtype
            {"obs": np.ones((3, 2), np.float32), "step": np.int32(1)},  # shape
            {"obs": jnp.ones((2, 3)), "step": jnp.ones(())},  # float step
            {"obs": jnp.ones((2, 3))},  # a column missing
        ],
        ids=["dtype", "shape", "jax-dtype", "missing"],
    )
    def test_mismatching_inserts_are_rejected(self, make_client, data):
        client = make_client(uniform_table("t", SIGNATURE))
        with pytest.raises(ValueError):
            client.insert(data, priorities={"t": 1.0})
        assert client.server_info()["t"].current_size == 0

    def test_writer_items_are_validated(self, make_client):
        signature = {"obs": jax.ShapeDtypeStruct((3, 2), jnp.float32)}
        client = make_client(uniform_table("t", signature))
        with client.trajectory_writer(4) as writer:
            for t in range(3):
                writer.append({"obs": jnp.full((2,), t, jnp.float32)})
            with pytest.raises(ValueError):
                writer.create_item("t", 1.0, {"obs": writer.history["obs"][-2:]})
            writer.create_item("t", 1.0, {"obs": writer.history["obs"][-3:]})
        batch = client.sample_batch("t", 1, unpack_as_table_signature=True)
        np.testing.assert_array_equal(batch.data["obs"][0], [[0, 0], [1, 1], [2, 2]])

    def test_a_jax_array_is_not_a_spec(self):
        with pytest.raises(ValueError, match="data, not a spec"):
            uniform_table("t", signature={"obs": jnp.zeros(3)})


class TestJaxArraysAsData:
    def test_insert_round_trips(self, make_client):
        client = make_client()
        obs = jnp.arange(6, dtype=jnp.float32).reshape(2, 3)
        flags = jnp.array([True, False, True])
        step = jnp.int32(9)
        client.insert([obs, flags, step], priorities={"t": 1.0})
        (sample,) = client.sample("t", emit_timesteps=False)
        got_obs, got_flags, got_step = sample.data
        assert (got_obs.dtype, got_flags.dtype, got_step.dtype) == (np.float32, np.bool_, np.int32)
        assert bool(jnp.array_equal(jnp.asarray(got_obs[0]), obs))
        assert bool(jnp.array_equal(jnp.asarray(got_flags[0]), flags))
        assert got_step.tolist() == [9]

    @pytest.mark.parametrize("compression", ["none", "lz4"])
    def test_trajectory_writer_append_round_trips(self, make_client, compression):
        client = make_client()
        with client.trajectory_writer(3, compression=compression) as writer:
            for t in range(5):
                writer.append({"obs": jnp.full((4,), t, jnp.float32), "t": jnp.int32(t)})
                if writer.episode_steps >= 2:
                    writer.create_item(
                        "t", 1.0, {"obs": writer.history["obs"][-2:], "t": writer.history["t"][-1]}
                    )
        batch = client.sample_batch("t", 12, unpack_as_table_signature=False)
        obs, last = (jnp.asarray(leaf) for leaf in batch.data)
        assert obs.shape == (12, 2, 4) and last.shape == (12,)
        expected = jnp.stack([last - 1, last], axis=1).astype(jnp.float32)[:, :, None]
        assert bool(jnp.array_equal(obs, jnp.broadcast_to(expected, (12, 2, 4))))

    def test_bfloat16_is_refused_with_a_clear_error(self, make_client):
        # ml_dtypes types have no portable type string; storing them would
        # hand back raw bytes, so they are refused up front.
        client = make_client()
        data = jnp.arange(3, dtype=jnp.bfloat16)
        with pytest.raises(ValueError, match="unsupported dtype bfloat16"):
            client.insert([data], priorities={"t": 1.0})
        writer = client.trajectory_writer(1)
        with pytest.raises(ValueError, match="unsupported dtype bfloat16"):
            writer.append({"x": data})
        writer.close()
        assert client.server_info()["t"].current_size == 0
