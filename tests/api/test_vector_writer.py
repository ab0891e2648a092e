"""VectorWriter: N environments' steps per call, items as N writers make them.

Every test runs on both transports (the embedded one runs the C++ vector
writer; over gRPC the same API runs a trajectory writer per environment),
and checks items by their contents: each must be the environment's own
newest steps, within one episode.
"""

from __future__ import annotations

import re
import threading
from typing import Any

import numpy as np
import pytest

import resound
from resound import TensorSpec, rate_limiters, selectors

from helpers.waiting import SAFETY

NUM_ENVS = 3


def queue(name: str = "q", max_size: int = 10_000, signature: Any = None) -> resound.Table:
    return resound.Table.queue(name, max_size, signature=signature)


def drain(client: resound.Client, table: str = "q") -> list[list[np.ndarray]]:
    """Every item's columns (the fields in sorted order), in insertion order."""
    size = client.server_info()[table].current_size
    if size == 0:
        return []
    samples = client.sample(table, size, emit_timesteps=False, timeout=SAFETY)
    return [[np.asarray(column) for column in sample.data] for sample in samples]


def step(t: int, episode: np.ndarray) -> dict[str, np.ndarray]:
    """Step t of every environment: obs encodes (env, episode, t), action t."""
    envs = np.arange(NUM_ENVS)
    obs = np.stack([envs, episode, np.full(NUM_ENVS, t)], axis=1).astype(np.float32)
    return {"action": (envs * 1000 + t).astype(np.int32), "obs": obs}


def test_items_are_each_environments_newest_steps_within_its_episode(serve):
    _, client = serve(queue())
    episode = np.zeros(NUM_ENVS, np.int64)
    expected = []  # (env, episode, first step) of each item, in creation order
    steps_in_episode = np.zeros(NUM_ENVS, np.int64)
    with client.vector_writer(NUM_ENVS, max_sequence_length=3, max_chunk_length=2) as writer:
        for t in range(12):
            writer.append(step(t, episode))
            steps_in_episode += 1
            created = writer.create_items("q", length=2)
            ready = [env for env in range(NUM_ENVS) if steps_in_episode[env] >= 2]
            assert created == len(ready)
            expected += [(env, episode[env], t - 1) for env in ready]
            assert list(writer.episode_steps) == list(steps_in_episode)
            # Episodes of different lengths: env 0 every 3 steps, env 1 every 5.
            done = np.array([t % 3 == 2, t % 5 == 4, False])
            writer.end_episodes(done)
            episode[done] += 1
            steps_in_episode[done] = 0
    items = drain(client)
    assert len(items) == len(expected)
    got = sorted((int(obs[0, 0]), int(obs[0, 1]), int(action[0]) % 1000) for action, obs in items)
    assert got == sorted((env, int(ep), first) for env, ep, first in expected)
    for action, obs in items:
        env, first = int(obs[0, 0]), int(action[0]) % 1000
        # Two consecutive steps of one environment's one episode.
        np.testing.assert_array_equal(action, [env * 1000 + first, env * 1000 + first + 1])
        np.testing.assert_array_equal(obs[:, 0], [env, env])
        assert obs[0, 1] == obs[1, 1]
        np.testing.assert_array_equal(obs[:, 2], [first, first + 1])


def test_each_environments_episodes_count_as_episodes(serve):
    _, client = serve(queue())
    with client.vector_writer(NUM_ENVS, max_sequence_length=1) as writer:
        for t in range(4):
            writer.append(step(t, np.zeros(NUM_ENVS)))
            writer.create_items("q", length=1)
        writer.end_episodes([0])  # indices work as well as masks
        writer.append(step(4, np.ones(NUM_ENVS)))
        writer.create_items("q", length=1, envs=[0])
    info = client.server_info()["q"]
    assert info.current_size == 4 * NUM_ENVS + 1
    assert info.num_episodes == NUM_ENVS + 1


def test_priorities_one_per_environment_and_selected_environments(serve):
    table = resound.Table(
        "p", selectors.Prioritized(1.0), selectors.Fifo(), 100, rate_limiters.MinSize(1)
    )
    server, client = serve(table)
    with client.vector_writer(NUM_ENVS, max_sequence_length=1) as writer:
        writer.append(step(0, np.zeros(NUM_ENVS)))
        assert writer.create_items("p", priority=[1.0, 2.0, 3.0], envs=[True, False, True]) == 2
    priorities = sorted(item.priority for item in server.table("p")._core.snapshot())
    assert priorities == [1.0, 3.0]


def test_items_share_their_environments_chunks(serve):
    _, client = serve(queue())
    with client.vector_writer(NUM_ENVS, max_sequence_length=2, max_chunk_length=8) as writer:
        for t in range(8):
            writer.append(step(t, np.zeros(NUM_ENVS)))
            writer.create_items("q", length=2)
    info = client.server_info()["q"]
    assert info.current_size == 7 * NUM_ENVS
    # One chunk per environment and field: 8 steps, 2 fields.
    assert info.num_chunks == NUM_ENVS * 2


def test_items_wait_for_their_chunks_and_flush_completes_them(serve):
    _, client = serve(queue())
    writer = client.vector_writer(NUM_ENVS, max_sequence_length=1, max_chunk_length=4)
    for t in range(3):
        writer.append(step(t, np.zeros(NUM_ENVS)))
        writer.create_items("q", length=1)
    if not isinstance(writer._per_env, list):  # the C++ writer: chunks of 4 steps
        assert client.server_info()["q"].current_size == 0
        assert writer.num_in_flight == 3 * NUM_ENVS
    writer.flush()
    assert client.server_info()["q"].current_size == 3 * NUM_ENVS
    assert writer.num_in_flight == 0
    writer.close()


def test_nested_steps_and_a_signature(serve):
    signature = {
        "obs": {"position": TensorSpec([2, 2], np.float32)},
        "done": TensorSpec([2], np.bool_),
    }
    _, client = serve(queue(signature=signature))
    with client.vector_writer(2, max_sequence_length=2) as writer:
        for t in range(3):
            writer.append(
                {
                    "obs": {"position": np.full((2, 2), t, np.float32)},
                    "done": np.array([0, t], bool),
                }
            )
            writer.create_items("q", length=2)
    samples = list(client.sample("q", 4, emit_timesteps=False, timeout=SAFETY))
    assert len(samples) == 4
    # The signature's fields, flat in its order: done, obs.position.
    done, position = samples[0].data
    np.testing.assert_array_equal(done, [False, False])
    np.testing.assert_array_equal(position, [[0, 0], [1, 1]])
    done, position = samples[-1].data
    np.testing.assert_array_equal(done, [True, True])
    np.testing.assert_array_equal(position, [[1, 1], [2, 2]])


def test_a_mismatched_signature_is_refused_and_nothing_else_is_lost(serve):
    _, client = serve(queue(signature={"x": TensorSpec([1], np.float32)}))
    writer = client.vector_writer(2, max_sequence_length=1, max_chunk_length=1)
    writer.append({"x": np.zeros(2, np.float64)})
    with pytest.raises(ValueError, match="signature"):
        writer.create_items("q", length=1)
        writer.flush()
    writer.close()
    assert client.server_info()["q"].current_size == 0


def test_a_full_queue_holds_the_writer_until_a_reader_makes_room(serve):
    server, client = serve(queue(max_size=2))
    writer = client.vector_writer(
        2, max_sequence_length=1, max_chunk_length=1, max_in_flight_items=2
    )
    writer.append({"x": np.zeros(2, np.float32)})
    writer.create_items("q", length=1)  # fills the queue
    writer.append({"x": np.ones(2, np.float32)})
    writer.create_items("q", length=1)  # two more wait in the writer
    with pytest.raises(resound.DeadlineExceededError):
        writer.flush(timeout_ms=50)
    taken: list[Any] = []
    reader = threading.Thread(
        target=lambda: taken.extend(client.sample("q", 4, emit_timesteps=False, timeout=SAFETY))
    )
    reader.start()
    writer.flush(timeout_ms=int(SAFETY * 1000))
    reader.join(SAFETY)
    assert not reader.is_alive()
    assert sorted(float(np.asarray(s.data[0]).reshape(-1)[0]) for s in taken) == [0, 0, 1, 1]
    writer.close()
    del server


@pytest.mark.parametrize(
    ("make_step", "error", "message"),
    [
        (lambda: {"x": np.zeros((2, 4), np.float32)}, ValueError, "field ('x',) has shape [2, 4]"),
        (lambda: {"x": np.zeros((3, 3), np.int32)}, ValueError, "field ('x',) is int32"),
        (lambda: {"y": np.zeros((3, 3), np.float32)}, ValueError, "structure"),
    ],
    ids=["shape", "dtype", "structure"],
)
def test_a_step_unlike_the_first_is_refused_naming_the_field(serve, make_step, error, message):
    _, client = serve(queue())
    with client.vector_writer(3, max_sequence_length=1) as writer:
        writer.append({"x": np.zeros((3, 3), np.float32)})
        with pytest.raises(error, match=re.escape(message)):
            writer.append(make_step())
        # The writer still works.
        writer.append({"x": np.ones((3, 3), np.float32)})
        assert list(writer.episode_steps) == [2, 2, 2]


def test_bad_arguments_name_the_argument(serve):
    _, client = serve(queue())
    with pytest.raises(ValueError, match="num_envs must be >= 1"):
        client.vector_writer(0, max_sequence_length=1)
    with pytest.raises(TypeError, match="max_sequence_length must be an int"):
        client.vector_writer(2, max_sequence_length=1.5)
    writer = client.vector_writer(2, max_sequence_length=2)
    with pytest.raises(ValueError, match="leading axis of num_envs=2"):
        writer.append({"x": np.zeros(3)})
    writer.append({"x": np.zeros(2)})
    with pytest.raises(ValueError, match=re.escape("length must be in [1, max_sequence_length=2]")):
        writer.create_items("q", length=3)
    with pytest.raises(ValueError, match="one value or one per environment"):
        writer.create_items("q", priority=[1.0, 2.0, 3.0], length=1)
    with pytest.raises(ValueError, match="finite"):
        writer.create_items("q", priority=float("nan"), length=1)
    with pytest.raises(ValueError, match=re.escape("envs indices must be in [0, 2)")):
        writer.create_items("q", length=1, envs=[2])
    with pytest.raises(ValueError, match=re.escape("mask must have shape (2,)")):
        writer.end_episodes(np.ones(3, bool))
    with pytest.raises(TypeError, match="table must be a str"):
        writer.create_items(1, length=1)
    writer.close()
    with pytest.raises(RuntimeError, match="closed"):
        writer.append({"x": np.zeros(2)})


def test_a_second_thread_on_a_waiting_writer_does_not_stop_the_reader(serve):
    # Thread one waits in flush for a full queue; thread two calls append on
    # the same writer meanwhile. The reader must still get the GIL and make
    # room, so both finish.
    _, client = serve(queue(max_size=1))
    writer = client.vector_writer(1, max_sequence_length=1, max_chunk_length=1)
    writer.append({"x": np.zeros(1, np.float32)})
    writer.create_items("q", length=1)
    writer.append({"x": np.ones(1, np.float32)})
    writer.create_items("q", length=1)  # waits in the writer: the queue is full
    flushing = threading.Thread(target=writer.flush)
    flushing.start()
    appending = threading.Thread(target=lambda: writer.append({"x": np.ones(1, np.float32)}))
    appending.start()
    taken = list(client.sample("q", 2, emit_timesteps=False, timeout=SAFETY))
    flushing.join(SAFETY)
    appending.join(SAFETY)
    assert not flushing.is_alive() and not appending.is_alive()
    assert [float(np.asarray(s.data[0]).reshape(-1)[0]) for s in taken] == [0.0, 1.0]
    writer.close()


def test_a_long_wait_for_a_full_table_is_logged_and_a_timeout_says_why(serve, caplog):
    _, client = serve(queue(max_size=1))
    writer = client.vector_writer(2, max_sequence_length=1, max_chunk_length=1)
    writer.append({"x": np.zeros(2, np.float32)})
    writer.create_items("q", length=1)  # one goes in, one waits
    resound.set_wait_warning(0.05)
    try:
        with (
            caplog.at_level("WARNING", logger="resound.writer"),
            pytest.raises(resound.DeadlineExceededError, match=r"Queue\(1\) needs 1 more"),
        ):
            writer.flush(timeout_ms=300)
    finally:
        resound.set_wait_warning(30.0)
    assert any(
        "blocked" in record.getMessage() and "Queue(1)" in record.getMessage()
        for record in caplog.records
    )
    writer.__exit__(RuntimeError, None, None)  # drops what is queued


def test_later_steps_convert_as_the_first_step_did(serve):
    # Lists, a non-contiguous array and an equivalent dtype (long long for
    # int64) are converted, as before the core checked the arrays itself.
    _, client = serve(queue())
    with client.vector_writer(2, max_sequence_length=1, max_chunk_length=1) as writer:
        steps = [
            {"n": np.array([0, 1], np.int64), "x": np.zeros((2, 2), np.float32)},
            {"n": [2, 3], "x": [[1, 1], [1, 1]]},
            {"n": np.array([4, 5], np.longlong), "x": np.full((2, 4), 2, np.float32)[:, ::2]},
        ]
        for step in steps:
            writer.append(step)
            assert writer.create_items("q", length=1) == 2
    # Each item's n is its environment's step t's 2 * t + env, its x is t.
    got = sorted((int(n[0]), float(x[0, 0])) for n, x in drain(client))
    assert got == [(0, 0), (1, 0), (2, 1), (3, 1), (4, 2), (5, 2)]


def test_a_first_step_the_core_refuses_leaves_the_writer_unstarted():
    server = resound.Server([queue()], listen=False)
    client = server.in_process_client()
    try:
        with client.vector_writer(2, max_sequence_length=1) as writer:
            with pytest.raises(ValueError, match="dtype"):
                writer.append({"t": np.zeros(2, "datetime64[ns]")})
            writer.append({"x": np.zeros(2, np.float32)})
            assert writer.create_items("q", length=1) == 2
        assert client.server_info()["q"].current_size == 2
    finally:
        server.stop()
