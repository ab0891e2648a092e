"""Items over history slices get the right rows wherever chunk boundaries
fall: chunks cut by length, by flush and by end_episode(clear_buffers=False)."""

from __future__ import annotations

import numpy as np
import pytest

import resound


def _client() -> resound.Client:
    # A queue hands items out once each, in insertion order.
    return resound.Server([resound.Table.queue("t", 10_000)], listen=False).in_process_client()


@pytest.mark.parametrize("chunk_length", [1, 2, 3, 7, 10])
@pytest.mark.parametrize("flush_every", [0, 1, 4])
def test_sequence_items_hold_the_steps_they_name(chunk_length: int, flush_every: int) -> None:
    client = _client()
    writer = client.trajectory_writer(10, max_chunk_length=chunk_length)
    expected = []
    for step in range(40):
        writer.append({"x": np.int64(step)})
        if step == 19:
            writer.end_episode(clear_buffers=False)  # cut every chunk, keep refs
        length = 1 + step % 10
        if step + 1 >= length:
            writer.create_item("t", 1.0, {"x": writer.history["x"][-length:]})
            expected.append(list(range(step + 1 - length, step + 1)))
        if flush_every and step % flush_every == 0:
            writer.flush(block_until_num_items=1)
    writer.flush()
    got = [s.data[0].tolist() for s in client.sample("t", len(expected), emit_timesteps=False)]
    assert got == expected


def test_a_slice_of_a_history_slice_is_still_right() -> None:
    client = _client()
    writer = client.trajectory_writer(8, max_chunk_length=3)
    for step in range(8):
        writer.append({"x": np.int64(step)})
    column = writer.history["x"][-8:]
    writer.create_item("t", 1.0, {"x": column[2:7]})
    writer.create_item("t", 1.0, {"x": column[::2]})
    writer.create_item("t", 1.0, {"x": column[[5, 4, 4]]})
    writer.flush()
    got = [s.data[0].tolist() for s in client.sample("t", 3, emit_timesteps=False)]
    assert got == [[2, 3, 4, 5, 6], [0, 2, 4, 6], [5, 4, 4]]


def test_an_expired_oldest_reference_is_refused() -> None:
    client = _client()
    writer = client.trajectory_writer(3, max_chunk_length=1)
    for step in range(3):
        writer.append({"x": np.int64(step)})
    column = writer.history["x"][-3:]
    writer.append({"x": np.int64(3)})  # step 0 leaves the keep-alive window
    with pytest.raises(ValueError, match="expired"):
        writer.create_item("t", 1.0, {"x": column})
