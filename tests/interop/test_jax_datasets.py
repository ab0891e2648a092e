"""resound.datasets.jax.DeviceIterator and batches without copies: batch
leaves alias into jax arrays on the CPU (64-byte aligned), over both
transports; the iterator yields device arrays in sampling order, one shape
for jax.jit with drop_remainder, and loses nothing from a queue."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

import resound  # noqa: E402
from resound.datasets.jax import DeviceIterator  # noqa: E402

from helpers.paths import REPO_ROOT  # noqa: E402

SAFETY = 30.0


def wait_until(predicate: Callable[[], bool], what: str) -> None:
    """Polls ``predicate`` until it holds (at most SAFETY seconds)."""
    deadline = time.monotonic() + SAFETY
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


@pytest.fixture(params=["embedded", "grpc"])
def make_client(request: pytest.FixtureRequest) -> Iterator[Callable[..., resound.Client]]:
    """make_client(*tables): an in-process client of an embedded server, or a
    gRPC client of a server on a 127.0.0.1 port it picks."""
    servers: list[resound.Server] = []

    def make(*tables: resound.Table) -> resound.Client:
        tables = tables or (resound.Table.queue("q", 10_000),)
        if request.param == "embedded":
            server = resound.Server(list(tables), listen=False)
            servers.append(server)
            return server.in_process_client()
        server = resound.Server(list(tables))
        servers.append(server)
        return resound.Client(f"127.0.0.1:{server.port}", transport="grpc")

    yield make
    for server in servers:
        server.stop()


def fill(client: resound.Client, start: int, count: int, table: str = "q") -> None:
    for i in range(start, start + count):
        client.insert(
            {"obs": np.full((2, 3), i, np.float32), "step": np.int32(i)}, priorities={table: 1.0}
        )


def steps(batch: resound.ReplaySample) -> list[int]:
    obs, step = batch.data
    assert isinstance(obs, jax.Array) and isinstance(step, jax.Array)
    np.testing.assert_array_equal(np.asarray(obs), np.asarray(step)[:, :, None, None] + 0 * obs)
    return np.asarray(step)[:, 0].tolist()


class TestNoCopy:
    def test_device_put_and_dlpack_alias_every_leaf(self, make_client) -> None:
        client = make_client()
        fill(client, 0, 16)
        batch = client.sample_batch("q", 16)
        for leaf in resound.nest.flatten(batch):
            assert leaf.ctypes.data % 64 == 0
            for convert in (jax.device_put, jax.dlpack.from_dlpack):
                on_device = convert(leaf)
                if leaf.dtype.itemsize == 8 and not jax.config.jax_enable_x64:
                    continue  # JAX narrows 64-bit types (a copy by its own rule)
                assert on_device.unsafe_buffer_pointer() == leaf.ctypes.data, convert
                np.testing.assert_array_equal(np.asarray(on_device), leaf)

    def test_16_byte_aligned_memory_is_copied(self) -> None:
        # What the alignment buys: the same data 16 bytes off a 64-byte
        # boundary is copied by XLA.
        base = resound._core.pooled_empty((1024 + 4,), np.float32)
        shifted = base[4:]
        assert shifted.ctypes.data % 64 == 16
        assert jax.device_put(shifted).unsafe_buffer_pointer() != shifted.ctypes.data


class TestDeviceIterator:
    def test_batches_in_order_on_the_device(self, make_client) -> None:
        client = make_client()
        fill(client, 0, 40)
        with DeviceIterator(client, "q", 8, num_batches=5) as batches:
            got = [steps(batch) for batch in batches]
        assert got == [list(range(i, i + 8)) for i in range(0, 40, 8)]

    def test_the_next_batches_go_to_the_device_before_they_are_asked_for(
        self, make_client, monkeypatch
    ) -> None:
        client = make_client()
        fill(client, 0, 24)
        puts = []
        original = jax.device_put

        def recording_put(value, target=None):
            puts.append(threading.current_thread().name)
            return original(value, target)

        monkeypatch.setattr(jax, "device_put", recording_put)
        with DeviceIterator(client, "q", 8, prefetch=2) as batches:
            assert steps(next(batches)) == list(range(8))
            # While the learner holds batch 0, the prefetch thread puts
            # batches 1 and 2 on the device (its queue holds 2).
            wait_until(lambda: len(puts) == 3, "batches 1 and 2 put on the device")
            assert set(puts) == {"resound-batch-prefetch"}
            assert steps(next(batches)) == list(range(8, 16))
            assert steps(next(batches)) == list(range(16, 24))
            assert len(puts) == 3

    def test_jit_sees_one_shape_with_drop_remainder(self, make_client) -> None:
        client = make_client()
        fill(client, 0, 100)
        traces = []

        @jax.jit
        def mean(obs):
            traces.append(obs.shape)
            return jnp.mean(obs)

        batches = DeviceIterator(client, "q", 32, timeout=0.3, drop_remainder=True)
        means = [float(mean(batch.data[0])) for batch in batches]
        assert traces == [(32, 1, 2, 3)]
        assert means == [15.5, 47.5, 79.5]
        remainder = batches.remainder()  # nothing sampled is lost
        assert remainder is not None
        assert remainder.data[1][:, 0].tolist() == list(range(96, 100))
        assert isinstance(remainder.data[0], np.ndarray)

    def test_without_drop_remainder_the_last_batch_is_short(self, make_client) -> None:
        client = make_client()
        fill(client, 0, 20)
        with DeviceIterator(client, "q", 8, timeout=0.3) as batches:
            sizes = [len(batch.info.key) for batch in batches]
        assert sizes == [8, 8, 4]

    def test_info_stays_exact_on_the_host_for_priority_updates(self, make_client) -> None:
        table = resound.Table(
            "p",
            resound.selectors.Prioritized(1.0),
            resound.selectors.Fifo(),
            100,
            resound.rate_limiters.MinSize(1),
        )
        client = make_client(table)
        fill(client, 0, 10, table="p")
        with DeviceIterator(client, "p", 10, num_batches=1) as batches:
            (batch,) = list(batches)
        assert isinstance(batch.info.key, np.ndarray) and batch.info.key.dtype == np.uint64
        new = jnp.asarray(batch.data[1][:, 0], jnp.float32) + 1.0
        client.update_priorities("p", (batch.info.key, np.asarray(new)))
        sampled = client.sample_batch("p", 50)
        by_key = dict(zip(batch.info.key.tolist(), np.asarray(new).tolist(), strict=True))
        for key, priority in zip(sampled.info.key.tolist(), sampled.info.priority, strict=True):
            assert priority == by_key.get(key, 1.0)  # 1.0: not in the batch, unchanged
        assert set(sampled.info.key.tolist()) & set(by_key)

    def test_string_leaves_stay_numpy(self, make_client) -> None:
        client = make_client()
        for i in range(4):
            client.insert({"n": np.int32(i), "s": np.array(b"x" * (i + 1))}, {"q": 1.0})
        with DeviceIterator(client, "q", 4, num_batches=1) as batches:
            (batch,) = list(batches)
        numbers, strings = batch.data
        assert isinstance(numbers, jax.Array) and np.asarray(numbers)[:, 0].tolist() == [0, 1, 2, 3]
        assert isinstance(strings, np.ndarray) and strings[-1, 0] == b"xxxx"

    def test_device_and_sharding(self, make_client) -> None:
        client = make_client()
        fill(client, 0, 16)
        device = jax.devices()[0]
        with DeviceIterator(client, "q", 4, device=device, num_batches=1) as batches:
            (batch,) = list(batches)
        assert batch.data[0].devices() == {device}
        mesh = jax.sharding.Mesh(np.array(jax.devices()), ("batch",))
        sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("batch"))
        with DeviceIterator(client, "q", 4, sharding=sharding, num_batches=1) as batches:
            (batch,) = list(batches)
        assert batch.data[0].sharding == sharding

    def test_unpacked_as_the_table_signature(self, make_client) -> None:
        signature = {
            "obs": jax.ShapeDtypeStruct((2, 3), jnp.float32),
            "step": jax.ShapeDtypeStruct((), jnp.int32),
        }
        client = make_client(resound.Table.queue("q", 100, signature=signature))
        fill(client, 0, 4)
        with DeviceIterator(
            client, "q", 4, num_batches=1, unpack_as_table_signature=True
        ) as batches:
            (batch,) = list(batches)
        assert set(batch.data) == {"obs", "step"}
        assert np.asarray(batch.data["step"])[:, 0].tolist() == [0, 1, 2, 3]

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"device": "cpu"}, "device must be a jax.Device"),
            ({"sharding": "batch"}, "sharding must be a jax.sharding.Sharding"),
            ({"batch_size": 0}, "batch_size"),
            ({"drop_remainder": "yes"}, "drop_remainder must be True or False"),
        ],
    )
    def test_bad_arguments_name_themselves(self, make_client, kwargs, message) -> None:
        client = make_client()
        arguments = {"batch_size": 4, **kwargs}
        with pytest.raises(ValueError, match=message):
            DeviceIterator(client, "q", **arguments)

    def test_device_and_sharding_together_are_refused(self, make_client) -> None:
        client = make_client()
        device = jax.devices()[0]
        sharding = jax.sharding.SingleDeviceSharding(device)
        with pytest.raises(ValueError, match="device or sharding, not both"):
            DeviceIterator(client, "q", 4, device=device, sharding=sharding)


def test_importing_the_module_does_not_import_jax() -> None:
    code = "import sys, resound.datasets.jax; print('jax' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=SAFETY
    )
    assert result.stdout.strip() == "False", result.stderr


EXAMPLE = REPO_ROOT / "examples" / "jax_learner.py"


def test_the_example_learner_runs_and_learns() -> None:
    result = subprocess.run(
        [sys.executable, str(EXAMPLE), "--steps", "60", "--batch-size", "64"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr  # 1: the error did not drop
    assert "60 steps of 64" in result.stdout


def test_the_example_says_what_to_install_without_jax() -> None:
    code = (
        "import runpy, sys; sys.modules['jax'] = None; "
        f"runpy.run_path({str(EXAMPLE)!r}, run_name='__main__')"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=SAFETY
    )
    assert result.returncode == 1
    assert 'pip install "jax[cpu]"' in result.stderr
