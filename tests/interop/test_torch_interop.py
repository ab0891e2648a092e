"""resound beside PyTorch: sampled numpy arrays become tensors without a copy
(torch.from_numpy), and CPU tensors (or their .numpy()) go in as data."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pytest
import torch

import resound

from helpers.interop import Servers, uniform_table


@pytest.fixture
def make_client() -> Iterator[Callable[..., resound.Client]]:
    servers = Servers()
    yield servers.make_client
    servers.close()


def fill(client: resound.Client, count: int = 8) -> None:
    for i in range(count):
        client.insert(
            {
                "obs": np.full((2, 3), i, np.float32),
                "action": np.int64(i),
                "done": np.bool_(i % 2),
            },
            priorities={"t": 1.0},
        )


def leaves(batch: resound.ReplaySample) -> list[np.ndarray]:
    return list(batch.info) + resound.nest.flatten(batch.data)


class TestTorchFromSampledNumpy:
    def test_from_numpy_shares_memory_with_every_leaf_of_a_batch(self, make_client):
        client = make_client()
        fill(client)
        batch = client.sample_batch("t", 16)
        assert [leaf.shape for leaf in batch.data] == [(16, 1), (16, 1), (16, 1, 2, 3)]
        for array in leaves(batch):
            assert isinstance(array, np.ndarray)
            tensor = torch.from_numpy(array)  # warns (an error here) if not writable
            assert tensor.data_ptr() == array.ctypes.data
            assert tuple(tensor.shape) == array.shape
            np.testing.assert_array_equal(tensor.numpy(), array)
            assert np.shares_memory(tensor.numpy(), array)

    def test_info_dtypes_map_to_torch_dtypes(self, make_client):
        client = make_client()
        fill(client, 3)
        info = client.sample_batch("t", 5).info
        assert torch.from_numpy(info.key).dtype == torch.uint64
        assert torch.from_numpy(info.probability).dtype == torch.float64
        assert torch.from_numpy(info.table_size).dtype == torch.int64
        assert torch.from_numpy(info.priority).dtype == torch.float64
        assert torch.from_numpy(info.times_sampled).dtype == torch.int32
        assert torch.all(torch.from_numpy(info.table_size) == 3)

    def test_values_of_a_batch_match_what_was_inserted(self, make_client):
        client = make_client()
        fill(client)
        batch = client.sample_batch("t", 32)
        # dm-tree order: 'action', 'done', 'obs'.
        action, done, obs = (torch.from_numpy(leaf) for leaf in batch.data)
        assert obs.dtype == torch.float32 and action.dtype == torch.int64
        assert done.dtype == torch.bool
        # Each item's obs is filled with its action number; done is its parity.
        expected_obs = action.to(torch.float32).reshape(32, 1, 1, 1).expand(32, 1, 2, 3)
        assert torch.equal(obs, expected_obs)
        assert torch.equal(done, (action % 2).to(torch.bool))

    def test_a_tensor_owns_its_batch_after_the_arrays_are_dropped(self, make_client):
        client = make_client()
        fill(client)
        batch = client.sample_batch("t", 8)
        obs = torch.from_numpy(batch.data[2])
        expected = obs.clone()
        del batch
        client.reset("t")
        fill(client)  # new chunks may reuse freed memory
        assert torch.equal(obs, expected)

    @pytest.mark.parametrize("compression", ["none", "lz4"])
    @pytest.mark.parametrize("how", ["sample_batch", "sample", "timesteps"])
    def test_in_place_ops_on_tensors_leave_the_table_unchanged(self, make_client, compression, how):
        # from_numpy tensors are writable (no warning): they must not alias
        # the stored chunks, or `obs.sub_(mean)` would corrupt the replay.
        client = make_client()
        with client.trajectory_writer(4, compression=compression) as writer:
            for t in range(4):
                writer.append({"obs": np.full(3, t, np.float32)})
            writer.create_item("t", 1.0, {"obs": writer.history["obs"][-4:]})
        expected = np.repeat(np.arange(4, dtype=np.float32), 3).reshape(4, 3)
        for _ in range(2):
            if how == "sample_batch":
                arrays = [client.sample_batch("t", 2).data[0]]
            elif how == "sample":
                arrays = [s.data[0] for s in client.sample("t", 2, emit_timesteps=False)]
            else:
                arrays = [step.data[0] for step in next(client.sample("t", 1))]
            if how == "timesteps":
                np.testing.assert_array_equal(np.stack(arrays), expected)
            else:
                items = arrays if how == "sample" else list(arrays[0])
                assert len(items) == 2
                for item in items:
                    np.testing.assert_array_equal(item, expected)
            for array in arrays:
                torch.from_numpy(array).add_(100.0)

    def test_unpacked_batches_and_prefetched_batches_convert(self, make_client):
        signature = {
            "obs": resound.TensorSpec((2, 3), np.float32),
            "action": resound.TensorSpec((), np.int64),
            "done": resound.TensorSpec((), np.bool_),
        }
        client = make_client(uniform_table("t", signature))
        fill(client)
        batch = client.sample_batch("t", 4, unpack_as_table_signature=True)
        tensors = {name: torch.from_numpy(leaf) for name, leaf in batch.data.items()}
        assert tensors["obs"].shape == (4, 1, 2, 3)
        with client.sample_batches("t", 4, num_batches=3) as batches:
            for prefetched in batches:
                for array in leaves(prefetched):
                    tensor = torch.from_numpy(array)
                    assert tensor.data_ptr() == array.ctypes.data

    def test_arrays_from_sample_convert(self, make_client):
        client = make_client()
        fill(client, 4)
        samples = list(client.sample("t", 6, emit_timesteps=False))
        steps = list(client.sample("t", 6))
        assert len(samples) == len(steps) == 6
        for sample in samples:
            action, done, obs = (torch.from_numpy(leaf) for leaf in sample.data)
            assert obs.shape == (1, 2, 3) and action.shape == (1,) and done.shape == (1,)
            assert torch.all(obs == action.to(torch.float32))
            assert torch.from_numpy(sample.data[2]).data_ptr() == sample.data[2].ctypes.data
        for (step,) in steps:
            action, _, obs = (torch.from_numpy(leaf) for leaf in step.data)
            assert obs.shape == (2, 3) and action.shape == ()
            assert torch.all(obs == float(action))
            assert torch.as_tensor(step.info.key, dtype=torch.uint64).item() == step.info.key


class TestTorchTensorsAsData:
    @pytest.mark.parametrize("convert", ["numpy", "tensor"], ids=["tensor.numpy()", "tensor"])
    def test_insert_round_trips(self, make_client, convert):
        client = make_client()
        obs = torch.arange(6, dtype=torch.float32).reshape(2, 3)
        action = torch.tensor(7)
        mask = torch.tensor([True, False])
        data = [obs, action, mask]
        if convert == "numpy":
            data = [tensor.numpy() for tensor in data]
        client.insert(data, priorities={"t": 1.0})
        (sample,) = client.sample("t", emit_timesteps=False)
        got = [torch.from_numpy(leaf) for leaf in sample.data]
        assert [g.dtype for g in got] == [torch.float32, torch.int64, torch.bool]
        assert torch.equal(got[0], obs.unsqueeze(0))
        assert torch.equal(got[1], action.unsqueeze(0))
        assert torch.equal(got[2], mask.unsqueeze(0))

    def test_insert_of_a_non_contiguous_tensor(self, make_client):
        client = make_client()
        tensor = torch.arange(12, dtype=torch.int32).reshape(3, 4).t()  # a transposed view
        assert not tensor.is_contiguous()
        client.insert([tensor], priorities={"t": 1.0})
        batch = client.sample_batch("t", 1)
        assert torch.equal(torch.from_numpy(batch.data[0])[0, 0], tensor)

    @pytest.mark.parametrize("convert", ["numpy", "tensor"], ids=["tensor.numpy()", "tensor"])
    @pytest.mark.parametrize("compression", ["none", "lz4"])
    def test_trajectory_writer_append_round_trips(self, make_client, convert, compression):
        client = make_client()
        steps = [
            {"obs": torch.full((3,), float(t)), "reward": torch.tensor(t * 0.5)} for t in range(6)
        ]
        with client.trajectory_writer(4, compression=compression) as writer:
            for step in steps:
                writer.append(
                    step if convert == "tensor" else {k: v.numpy() for k, v in step.items()}
                )
                if writer.episode_steps >= 3:
                    writer.create_item(
                        "t",
                        1.0,
                        {"obs": writer.history["obs"][-3:], "reward": writer.history["reward"][-1]},
                    )
        assert client.server_info()["t"].current_size == 4
        batch = client.sample_batch("t", 20, unpack_as_table_signature=False)
        obs, reward = (torch.from_numpy(leaf) for leaf in batch.data)
        assert obs.shape == (20, 3, 3) and obs.dtype == torch.float32
        assert reward.shape == (20,) and reward.dtype == torch.float32
        # Item ending at step t: obs rows t-2..t, reward t/2.
        last = (reward * 2).to(torch.int64)
        for row, end in zip(obs, last, strict=True):
            expected = torch.arange(end - 2, end + 1, dtype=torch.float32)
            assert torch.equal(row, expected.unsqueeze(1).expand(3, 3))

    def test_writer_keeps_a_copy_when_the_tensor_is_reused(self, make_client):
        # An actor loop that refills one tensor in place must not change what
        # was appended before (the tensor and its np.asarray share memory).
        client = make_client()
        buffer = torch.zeros(4)
        with client.trajectory_writer(2) as writer:
            for t in range(2):
                buffer.fill_(float(t))
                writer.append({"obs": buffer})
            writer.create_item("t", 1.0, {"obs": writer.history["obs"][-2:]})
            buffer.fill_(99.0)
        buffer.fill_(-1.0)
        batch = client.sample_batch("t", 1)
        got = torch.from_numpy(batch.data[0])[0]
        assert torch.equal(got, torch.tensor([[0.0] * 4, [1.0] * 4]))

    def test_insert_keeps_a_copy_when_the_tensor_is_reused(self, make_client):
        client = make_client()
        buffer = torch.ones(3)
        client.insert([buffer], priorities={"t": 1.0})
        buffer.fill_(5.0)
        (sample,) = client.sample("t", emit_timesteps=False)
        assert torch.equal(torch.from_numpy(sample.data[0]), torch.ones(1, 3))

    def test_a_tensor_is_not_a_signature_spec(self):
        with pytest.raises(ValueError, match="data, not a spec"):
            uniform_table("t", signature={"obs": torch.zeros(3)})


class TestTorchPriorities:
    def test_update_priorities_takes_a_pair_of_tensors(self, make_client):
        client = make_client()
        client.insert([np.zeros(2)], priorities={"t": 1.0})
        keys = client.sample_batch("t", 1).info.key
        client.update_priorities("t", (torch.from_numpy(keys), torch.tensor([2.0])))
        assert client.sample_batch("t", 1).info.priority.tolist() == [2.0]
