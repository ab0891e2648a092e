"""resound.datasets.torch: BatchDataset in a DataLoader (batch_size=None) with
0 and 2 worker processes, against a resound-server process on 127.0.0.1 and
in-process; the values checked against what was written, every sample of a
queue seen once, priorities written back with the batch's uint64 keys."""

from __future__ import annotations

import logging
import pickle
import re
import subprocess
import sys
from collections.abc import Iterator

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import resound  # noqa: E402
from resound.datasets import torch as resound_torch  # noqa: E402

SAFETY = 30.0
QUEUE_CONFIG = """
[[tables]]
name = "queue"
kind = "queue"
max_size = 100000

[[tables]]
name = "replay"
sampler = "prioritized"
priority_exponent = 1.0
remover = "fifo"
max_size = 100000
rate_limiter = { kind = "min_size", min_size_to_sample = 1 }
"""
SERVING = re.compile(r"serving \d+ table\(s\) on 127\.0\.0\.1:(\d+)")


@pytest.fixture(scope="module")
def server_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A resound-server process on a port it picks."""
    config = tmp_path_factory.mktemp("torch") / "server.toml"
    config.write_text(QUEUE_CONFIG)
    process = subprocess.Popen(
        [sys.executable, "-m", "resound.server_command", "--config", str(config)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    assert process.stderr is not None
    seen = []
    for line in process.stderr:
        seen.append(line)
        match = SERVING.search(line)
        if match:
            break
    else:
        raise AssertionError(f"resound-server did not start: {''.join(seen)}")
    yield f"127.0.0.1:{match.group(1)}"
    process.terminate()
    process.wait(timeout=SAFETY)
    process.stderr.close()


def write_queue(client: resound.Client, count: int, table: str = "queue") -> None:
    """Items 0..count-1: obs float32[2, 3] full of i, step int64 i (squeezed)."""
    with client.trajectory_writer(2) as writer:
        for i in range(count):
            writer.append({"obs": np.full(3, i, np.float32), "step": np.int64(i)})
            trajectory = {"obs": writer.history["obs"][-1:], "step": writer.history["step"][-1]}
            writer.create_item(table, 1.0, trajectory)
        writer.flush()


def check_batch(batch: resound.ReplaySample, batch_size: int) -> list[int]:
    """The batch's step values, after checking every leaf against them."""
    obs, step = batch.data
    assert isinstance(obs, torch.Tensor) and obs.dtype == torch.float32
    assert obs.shape == (batch_size, 1, 3) and step.shape == (batch_size,)
    assert step.dtype == torch.int64
    assert torch.equal(obs, step.to(torch.float32)[:, None, None].expand(-1, 1, 3))
    assert batch.info.key.dtype == torch.uint64 and batch.info.key.shape == (batch_size,)
    assert batch.info.probability.dtype == torch.float64
    assert batch.info.times_sampled.dtype == torch.int32
    return step.tolist()


def make_embedded() -> tuple[resound.Server, resound.Client]:
    server = resound.Server(
        [resound.Table.queue("queue", 100_000)],
        listen=False,
    )
    return server, server.in_process_client()


class TestInProcess:
    def test_num_workers_0_yields_every_queued_item_once(self) -> None:
        server, client = make_embedded()
        try:
            write_queue(client, 250)
            dataset = resound_torch.BatchDataset(client, "queue", 50, num_batches=5)
            loader = torch.utils.data.DataLoader(dataset, batch_size=None)
            steps = [step for batch in loader for step in check_batch(batch, 50)]
            assert steps == list(range(250))  # a queue: in order, each once
        finally:
            server.stop()

    def test_from_numpy_without_a_copy(self) -> None:
        server, client = make_embedded()
        try:
            write_queue(client, 8)
            host = client.sample_batch("queue", 8)
            tensors = resound_torch.to_tensors(host)
            assert tensors.data[0].data_ptr() == host.data[0].ctypes.data
            assert tensors.info.key.data_ptr() == host.info.key.ctypes.data
        finally:
            server.stop()

    def test_string_columns_stay_numpy(self) -> None:
        server, client = make_embedded()
        try:
            for i in range(3):
                client.insert({"n": np.int32(i), "s": np.array(b"ab"[: i + 1])}, {"queue": 1.0})
            dataset = resound_torch.BatchDataset(client, "queue", 3, num_batches=1)
            (batch,) = list(torch.utils.data.DataLoader(dataset, batch_size=None))
            numbers, strings = batch.data
            assert isinstance(numbers, torch.Tensor) and numbers[:, 0].tolist() == [0, 1, 2]
            assert isinstance(strings, np.ndarray) and strings[:, 0].tolist() == [
                b"a",
                b"ab",
                b"ab",
            ]
        finally:
            server.stop()

    def test_drop_last_keeps_batches_full_and_warns_of_what_it_drops(self, caplog) -> None:
        server, client = make_embedded()
        try:
            write_queue(client, 130)
            dataset = resound_torch.BatchDataset(client, "queue", 50, timeout=0.3, drop_last=True)
            with caplog.at_level(logging.WARNING, logger="resound"):
                steps = [
                    check_batch(batch, 50)
                    for batch in torch.utils.data.DataLoader(dataset, batch_size=None)
                ]
            assert steps == [list(range(50)), list(range(50, 100))]
            assert "with 30 samples short of a batch of 50" in caplog.text
        finally:
            server.stop()

    def test_without_drop_last_the_last_batch_is_short(self) -> None:
        server, client = make_embedded()
        try:
            write_queue(client, 130)
            dataset = resound_torch.BatchDataset(client, "queue", 50, timeout=0.3)
            sizes = [len(b.info.key) for b in torch.utils.data.DataLoader(dataset, batch_size=None)]
            assert sizes == [50, 50, 30]
        finally:
            server.stop()

    # JAX, when loaded in this process by other test files, warns at every fork.
    @pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")
    def test_workers_refuse_an_in_process_client_and_fork(self) -> None:
        server, client = make_embedded()
        try:
            dataset = resound_torch.BatchDataset(client, "queue", 4)
            with pytest.raises(TypeError, match="num_workers=0"):
                pickle.dumps(dataset)
            loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=1)
            with pytest.raises(RuntimeError, match="forkserver"):
                next(iter(loader))  # torch's default start method here: fork
        finally:
            server.stop()

    def test_unpacked_as_the_table_signature(self) -> None:
        signature = {
            "obs": resound.TensorSpec((1, 3), np.float32),
            "step": resound.TensorSpec((), np.int64),
        }
        server = resound.Server(
            [resound.Table.queue("queue", 1000, signature=signature)], listen=False
        )
        try:
            client = server.in_process_client()
            write_queue(client, 4)
            dataset = resound_torch.BatchDataset(
                client, "queue", 4, num_batches=1, unpack_as_table_signature=True
            )
            (batch,) = list(torch.utils.data.DataLoader(dataset, batch_size=None))
            assert set(batch.data) == {"obs", "step"}
            assert batch.data["step"].tolist() == [0, 1, 2, 3]
        finally:
            server.stop()


class TestResoundServer:
    @pytest.mark.parametrize("num_workers", [0, 2])
    def test_every_item_once_and_priorities_written_back(
        self, server_address: str, num_workers: int
    ) -> None:
        client = resound.Client(server_address)
        client.reset("queue")
        write_queue(client, 400)
        loader = resound_torch.data_loader(
            client, "queue", 40, num_workers=num_workers, num_batches=10
        )
        steps = [step for batch in loader for step in check_batch(batch, 40)]
        # Each worker takes batches of its own from the one queue.
        assert sorted(steps) == list(range(400))
        assert client.server_info()["queue"].current_size == 0

    def test_keys_from_workers_update_priorities(self, server_address: str) -> None:
        client = resound.Client(server_address)
        client.reset("replay")
        write_queue(client, 20, table="replay")
        loader = resound_torch.data_loader(
            server_address, "replay", 10, num_workers=2, num_batches=2, pin_memory=False
        )
        updated = {}
        for batch in loader:
            check_batch(batch, 10)
            # Priority from the batch itself: step + 1 (a tensor, as a learner has).
            priorities = batch.data[1].to(torch.float64) + 1.0
            client.update_priorities("replay", (batch.info.key, priorities))
            updated.update(zip(batch.info.key.tolist(), priorities.tolist(), strict=True))
        assert len(updated) >= 1
        # Every key sampled now carries its new priority: exact uint64 keys.
        sampled = client.sample_batch("replay", 200)
        for key, priority in zip(sampled.info.key.tolist(), sampled.info.priority, strict=True):
            if key in updated:
                assert priority == updated[key]
        assert any(key in updated for key in sampled.info.key.tolist())


class TestPinMemory:
    def test_pin_memory_without_an_accelerator_is_refused(self) -> None:
        if torch.accelerator.is_available():
            pytest.skip("an accelerator is available: pin_memory works")
        with pytest.raises(ValueError, match="pin_memory=True needs an accelerator"):
            resound_torch.BatchDataset("localhost:1", "queue", 4, pin_memory=True)

    def test_pinned_batches(self) -> None:
        if not torch.accelerator.is_available():
            pytest.skip("pinned memory needs an accelerator")
        server, client = make_embedded()
        try:
            write_queue(client, 4)
            dataset = resound_torch.BatchDataset(client, "queue", 4, num_batches=1, pin_memory=True)
            (batch,) = list(dataset)
            assert batch.data[0].is_pinned() and batch.info.key.is_pinned()
            check_batch(batch, 4)
        finally:
            server.stop()


class TestArguments:
    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"batch_size": 0}, "batch_size"),
            ({"num_batches": 0}, "num_batches"),
            ({"timeout": -1.0}, "timeout"),
            ({"drop_last": 1}, "drop_last must be True or False"),
            ({"client": 8000}, "client must be a resound.Client or a server address"),
            ({"table": ""}, "table must be a table name"),
        ],
    )
    def test_bad_arguments_name_themselves(self, kwargs, message) -> None:
        arguments = {"client": "localhost:1", "table": "queue", "batch_size": 4, **kwargs}
        with pytest.raises(ValueError, match=message):
            resound_torch.BatchDataset(**arguments)

    def test_data_loader_refuses_fork(self) -> None:
        with pytest.raises(ValueError, match="multiprocessing_context must be"):
            resound_torch.data_loader("localhost:1", "queue", 4, multiprocessing_context="fork")


def test_importing_the_module_does_not_import_torch() -> None:
    code = "import sys, resound.datasets.torch; print('torch' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=SAFETY
    )
    assert result.stdout.strip() == "False", result.stderr


def test_the_class_pickles_by_name() -> None:
    dataset = resound_torch.BatchDataset("localhost:1", "queue", 4)
    copy = pickle.loads(pickle.dumps(dataset))
    assert type(copy) is resound_torch.BatchDataset
    assert isinstance(copy, torch.utils.data.IterableDataset)
    assert (copy.client, copy.table, copy.batch_size) == ("localhost:1", "queue", 4)
