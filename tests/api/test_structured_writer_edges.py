"""StructuredWriter at its edges, over both transports: a rejected append
leaves no trace (in the writer or the TrajectoryWriter under it), and
end_episode starts a new episode, with its buffers cleared or kept as asked,
even when its flush times out."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import resound
from resound import structured_writer as sw

from helpers.waiting import SAFETY

STEP = {"a": None, "b": None}  # flat: a, b
REF = sw.create_reference_step(STEP)
PAIRS = sw.create_config({"a": REF["a"][-2:], "b": REF["b"][-2:]}, "pairs")


def take(client: resound.Client, table: str, count: int) -> list[Any]:
    """The next `count` items of a queue as nested lists (bounded wait)."""
    samples = client.sample(table, count, emit_timesteps=False, timeout=SAFETY)
    return [[np.asarray(column).tolist() for column in sample.data] for sample in samples]


def size(server: resound.Server, table: str) -> int:
    return server.table(table).info.current_size


@pytest.mark.parametrize(
    "bad_step, error",
    [
        ({"a": np.float32(1), "b": 1.5}, r"wrong dtype provided for column 1 \(path=\('b',\)\)"),
        (
            {"a": np.float32(1), "b": np.zeros(2, np.int64)},
            r"incompatible shape provided for column 1 \(path=\('b',\)\)",
        ),
        ({"a": np.float32(1), "b": object()}, "unsupported object data"),
    ],
    ids=["dtype", "shape", "unsupported"],
)
def test_a_rejected_append_leaves_no_trace(serve, bad_step, error):
    server, client = serve(resound.Table.queue("pairs", 100))
    writer = client.structured_writer([PAIRS])
    writer.append({"a": np.float32(0), "b": 0})
    for _ in range(2):
        with pytest.raises(ValueError, match=error):
            writer.append(bad_step)
        assert not writer.step_is_open
    writer.append({"a": np.float32(1), "b": 1})  # the same step, fixed
    writer.append({"a": np.float32(2), "b": 2})
    writer.flush()
    # One item per accepted step after the first; none from the rejected ones.
    assert size(server, "pairs") == 2
    assert take(client, "pairs", 2) == [[[0.0, 1.0], [0, 1]], [[1.0, 2.0], [1, 2]]]


def test_a_rejected_partial_append_keeps_the_open_step(serve):
    server, client = serve(resound.Table.queue("pairs", 100))
    writer = client.structured_writer([PAIRS])
    writer.append({"a": np.float32(0), "b": 0})
    writer.append({"a": np.float32(1), "b": None}, partial_step=True)
    with pytest.raises(ValueError, match="has already been set in the active step"):
        writer.append({"a": np.float32(9), "b": 1})
    with pytest.raises(ValueError, match="wrong dtype"):
        writer.append({"a": None, "b": 1.5})
    assert writer.step_is_open
    writer.append({"a": None, "b": 1})  # completes the step
    writer.flush()
    assert take(client, "pairs", 1) == [[[0.0, 1.0], [0, 1]]]


def test_a_rejected_first_append_fixes_nothing(serve):
    # Not even the flattened length every later step must have.
    server, client = serve(resound.Table.queue("pairs", 100))
    last = sw.create_config(sw.create_reference_step([None])[0][-1], "pairs")
    writer = client.structured_writer([last])
    with pytest.raises(ValueError, match="unsupported object data"):
        writer.append([object(), 1, 2])
    writer.append([np.float32(5)])
    writer.flush()
    assert take(client, "pairs", 1) == [[5.0]]


@pytest.mark.parametrize("clear_buffers", [True, False], ids=["clear", "keep"])
def test_end_episode_timeout_still_starts_a_new_episode(serve, clear_buffers):
    # `every` (one step per item) goes to a queue of one, so its items wait;
    # `pairs` shows whether the buffers were kept.
    every = sw.create_config({"a": REF["a"][-1]}, "every")
    first_step = sw.create_config(
        {"a": REF["a"][-1]}, "first", conditions=[sw.Condition.step_index() == 0]
    )
    server, client = serve(
        resound.Table.queue("every", 1),
        resound.Table.queue("pairs", 100),
        resound.Table.queue("first", 100),
    )
    writer = client.structured_writer([every, PAIRS, first_step])
    for t in range(3):
        writer.append({"a": np.float32(t), "b": t})
    with pytest.raises(resound.DeadlineExceededError):
        writer.end_episode(clear_buffers=clear_buffers, timeout_ms=0)
    assert not writer.step_is_open
    for t in range(3, 5):
        writer.append({"a": np.float32(t), "b": t})
    # The waiting items still go in, in order, then the new episode's.
    assert take(client, "every", 5) == [[float(t)] for t in range(5)]
    writer.end_episode(timeout_ms=int(SAFETY * 1000))
    # Step indices restarted: step 3 was step 0 of the new episode.
    assert take(client, "first", 2) == [[0.0], [3.0]]
    pairs = [[[float(t), float(t + 1)], [t, t + 1]] for t in range(4)]
    if clear_buffers:
        del pairs[2]  # no pair spans the boundary between steps 2 and 3
    assert take(client, "pairs", len(pairs)) == pairs
    assert size(server, "pairs") == 0
