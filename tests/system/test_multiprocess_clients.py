"""Several client processes against one server process at once: writers in
each process insert keyed items and report what the server confirmed, a
sampler process samples meanwhile, and afterwards every confirmed item is in
the table. Real processes, a real resound-server, ports picked by the OS."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import resound

from helpers.server_processes import REPLAY_TABLE_TOML, ServerProcess

WRITER = textwrap.dedent(
    """
    import sys
    import numpy as np
    import resound

    address, index, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    client = resound.Client(address)
    with client.trajectory_writer(num_keep_alive_refs=4) as writer:
        for step in range(count):
            ident = np.int64(index * 1_000_000 + step)
            writer.append({"id": ident, "obs": np.full(8, step, np.float32)})
            if step >= 3:
                writer.create_item("replay", 1.0, {
                    "id": writer.history["id"][-1], "obs": writer.history["obs"][-4:],
                })
    # The context manager flushed: everything created is confirmed.
    print(count - 3)
    """
)

SAMPLER = textwrap.dedent(
    """
    import sys
    import resound

    client = resound.Client(sys.argv[1])
    seen = 0
    for _ in range(20):
        batch = client.sample_batch("replay", 16, timeout=30)
        assert batch.data[1].shape[1:] == (4, 8), batch.data[1].shape
        seen += len(batch.info.key)
    print(seen)
    """
)


@pytest.mark.slow
def test_writers_and_a_sampler_in_separate_processes_lose_nothing(tmp_path: Path):
    config = tmp_path / "server.toml"
    config.write_text(REPLAY_TABLE_TOML)
    served = ServerProcess(config)
    try:
        port = served.wait_for(r"on 127\.0\.0\.1:(\d+)").group(1)
        address = f"127.0.0.1:{port}"
        writers = [
            subprocess.Popen(
                [sys.executable, "-c", WRITER, address, str(index), "300"],
                stdout=subprocess.PIPE,
                text=True,
            )  # fmt: skip
            for index in range(3)
        ]
        sampler = subprocess.Popen(
            [sys.executable, "-c", SAMPLER, address], stdout=subprocess.PIPE, text=True
        )
        confirmed = []
        for process in writers:
            out, _ = process.communicate(timeout=120)
            assert process.returncode == 0
            confirmed.append(int(out))
        out, _ = sampler.communicate(timeout=120)
        assert sampler.returncode == 0 and int(out) == 320
        info = resound.Client(address).server_info()["replay"]
        assert info.current_size == sum(confirmed) == 3 * 297
        ids = set()
        for sample in resound.Client(address).sample("replay", 891, emit_timesteps=False):
            ids.add(int(sample.data[0]))
        # Uniform sampling with replacement sees most items; each id is one
        # a writer wrote.
        assert all(i // 1_000_000 in (0, 1, 2) and 3 <= i % 1_000_000 < 300 for i in ids)
    finally:
        assert served.stop() == 0
