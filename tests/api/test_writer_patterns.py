"""Acme's ways of using the TrajectoryWriter, checked value by value through
embedded servers: n-step transitions written with partial steps, overlapping
sequences (length 10, period 5) over several episodes with and without
clearing the buffers at the boundaries, whole episodes, and one step shared
by items of two tables. Queue tables keep the sampling order known."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import resound
from resound import _codec

from helpers.waiting import SAFETY


def observation(episode: int, t: int) -> np.ndarray:
    return np.array([episode, t, episode * 100 + t], np.float32)


def action(episode: int, t: int) -> np.int32:
    return np.int32(10 * t + episode)


def reward(episode: int, t: int) -> np.float32:
    return np.float32(t * 0.25 + episode)


def discount(length: int, t: int) -> np.float32:
    return np.float32(0.0 if t == length - 1 else 0.9)


def sample_all(client: resound.Client, table: str, count: int) -> list[dict[str, np.ndarray]]:
    """The next `count` items of a queue, unpacked by the field names below."""
    out = []
    for sample in client.sample(table, count, emit_timesteps=False, timeout=SAFETY):
        out.append(sample.data)
    return out


def stored_items(server: resound.Server, table: str) -> list[Any]:
    return sorted(server.table(table)._core.snapshot(), key=lambda item: item.inserted_at)


def n_step_return(rewards: np.ndarray, discounts: np.ndarray) -> float:
    total, scale = 0.0, 1.0
    for r, d in zip(rewards.tolist(), discounts.tolist(), strict=True):
        total += scale * r
        scale *= d
    return total


# --- n-step transitions


@pytest.mark.parametrize("chunk_length", [1, 2, 4])
@pytest.mark.parametrize("n", [1, 3])
def test_n_step_transitions(serve, n, chunk_length):
    # Acme's NStepTransitionAdder: the first observation opens a step with a
    # partial append, each action/reward/discount completes it and the next
    # observation opens the next one. A transition from step t reads obs_t,
    # action_t, the rewards and discounts of steps t..t+n-1 and obs_{t+n};
    # at the end of an episode the last transitions are truncated.
    server, client = serve(resound.Table.queue("transitions", 1000))
    writer = client.trajectory_writer(n + 1, max_chunk_length=min(chunk_length, n + 1))
    lengths = [5, 1, 2 * n + 1]
    expected = []
    for episode, length in enumerate(lengths):
        writer.append({"observation": observation(episode, 0)}, partial_step=True)

        def create(episode: int, t: int, end: int) -> None:
            history = writer.history
            writer.create_item(
                "transitions",
                1.0,
                {
                    "observation": history["observation"][t],
                    "action": history["action"][t],
                    "reward": history["reward"][t:end],
                    "discount": history["discount"][t:end],
                    "next_observation": history["observation"][end],
                },
            )
            expected.append((episode, t, end))

        for t in range(length):
            writer.append(
                {
                    "action": action(episode, t),
                    "reward": reward(episode, t),
                    "discount": discount(length, t),
                }
            )
            writer.append({"observation": observation(episode, t + 1)}, partial_step=True)
            if t + 1 >= n:
                create(episode, t + 1 - n, t + 1)
            writer.flush(block_until_num_items=2)  # bounded run-ahead, as Acme does
        for t in range(max(0, length - n + 1), length):
            create(episode, t, length)
        writer.end_episode()
        assert writer.episode_steps == 0
    assert len(expected) == sum(lengths)
    samples = sample_all(client, "transitions", len(expected))
    for (episode, t, end), data in zip(expected, samples, strict=True):
        # Flattened in sorted key order.
        got_action, got_discount, got_next, got_obs, got_reward = data
        length = lengths[episode]
        np.testing.assert_array_equal(got_obs, observation(episode, t))
        assert got_action == action(episode, t)
        np.testing.assert_array_equal(got_reward, [reward(episode, s) for s in range(t, end)])
        np.testing.assert_array_equal(got_discount, [discount(length, s) for s in range(t, end)])
        np.testing.assert_array_equal(got_next, observation(episode, end))
        want_return = sum(reward(episode, s) * 0.9 ** (s - t) for s in range(t, end))
        assert n_step_return(got_reward, got_discount) == pytest.approx(want_return)
    assert writer.num_pending_items == 0


def test_n_step_items_share_chunks_with_their_neighbours(serve):
    # Overlapping transitions reference the same stored steps: the table
    # holds far fewer chunks than the items reference in all.
    server, client = serve(resound.Table.queue("transitions", 1000))
    n = 3
    writer = client.trajectory_writer(n + 1, max_chunk_length=n + 1)
    for t in range(40):
        writer.append({"obs": observation(0, t), "reward": reward(0, t)})
        if t >= n:
            writer.create_item(
                "transitions",
                1.0,
                {"obs": writer.history["obs"][-n - 1], "rewards": writer.history["reward"][-n:]},
            )
    writer.flush()
    items = stored_items(server, "transitions")
    assert len(items) == 40 - n
    referenced = sum(len(slices) for item in items for slices, _ in item.trajectory)
    distinct = {chunk.key for item in items for chunk in item.chunks}
    assert server.table("transitions").info.num_chunks == len(distinct)
    assert len(distinct) <= 2 * (40 // (n + 1) + 1)
    assert referenced > len(distinct)
    for t, item in enumerate(items, start=n):
        obs, rewards = _codec.gather_item(item.trajectory, item.chunks, {})
        np.testing.assert_array_equal(obs, observation(0, t - n))
        np.testing.assert_array_equal(rewards, [reward(0, s) for s in range(t - n + 1, t + 1)])


# --- overlapping sequences


SEQUENCE_LENGTH = 10
PERIOD = 5


@pytest.mark.parametrize("chunk_length", [3, 5, 10])
@pytest.mark.parametrize("clear_buffers", [True, False], ids=["clear", "keep"])
def test_overlapping_sequences_over_episodes(serve, clear_buffers, chunk_length):
    # Acme's SequenceAdder: every PERIOD steps, an item over the last
    # SEQUENCE_LENGTH steps. Cleared buffers restart the count at each
    # episode (sequences never cross a boundary); kept buffers let sequences
    # run on across episode boundaries.
    server, client = serve(resound.Table.queue("sequences", 1000))
    writer = client.trajectory_writer(SEQUENCE_LENGTH, max_chunk_length=chunk_length)
    lengths = [23, 10, 9, 31, 4]
    expected: list[list[tuple[int, int]]] = []
    window: list[tuple[int, int]] = []  # (episode, t) of the steps since the last clear
    for episode, length in enumerate(lengths):
        for t in range(length):
            writer.append(
                {
                    "observation": observation(episode, t),
                    "action": action(episode, t),
                    "reward": reward(episode, t),
                }
            )
            window.append((episode, t))
            assert len(writer.history["action"]) == len(window)
            if len(window) >= SEQUENCE_LENGTH and (len(window) - SEQUENCE_LENGTH) % PERIOD == 0:
                history = writer.history
                writer.create_item(
                    "sequences",
                    1.0,
                    {key: history[key][-SEQUENCE_LENGTH:] for key in history},
                )
                expected.append(window[-SEQUENCE_LENGTH:])
        writer.end_episode(clear_buffers=clear_buffers)
        if clear_buffers:
            window = []
    if clear_buffers:
        # 23 steps: starts 0, 5, 10; 10: 0; 9: none; 31: 0..20; 4: none.
        assert [seq[0] for seq in expected] == [
            (0, 0), (0, 5), (0, 10), (1, 0), (3, 0), (3, 5), (3, 10), (3, 15), (3, 20),
        ]  # fmt: skip
    else:
        assert len(expected) == (sum(lengths) - SEQUENCE_LENGTH) // PERIOD + 1
        assert any(seq[0][0] != seq[-1][0] for seq in expected)  # some cross a boundary
    items = stored_items(server, "sequences")
    for steps, item in zip(expected, items, strict=True):
        episodes = {chunk.episode_id for chunk in item.chunks}
        assert len(episodes) == len({episode for episode, _ in steps})
    samples = sample_all(client, "sequences", len(expected))
    for steps, (got_action, got_obs, got_reward) in zip(expected, samples, strict=True):
        np.testing.assert_array_equal(got_obs, [observation(e, t) for e, t in steps])
        np.testing.assert_array_equal(got_action, [action(e, t) for e, t in steps])
        np.testing.assert_array_equal(got_reward, [reward(e, t) for e, t in steps])


def test_sequences_sampled_as_a_batch(serve):
    # Equal-length sequences stack into [batch, time, ...] arrays.
    table = resound.Table(
        "replay",
        resound.selectors.Fifo(),
        resound.selectors.Fifo(),
        100,
        resound.rate_limiters.MinSize(1),
        max_times_sampled=1,
    )
    server, client = serve(table)
    with client.trajectory_writer(SEQUENCE_LENGTH, max_chunk_length=4) as writer:
        for t in range(30):
            writer.append({"observation": observation(0, t), "action": action(0, t)})
            if t + 1 >= SEQUENCE_LENGTH and (t + 1 - SEQUENCE_LENGTH) % PERIOD == 0:
                writer.create_item(
                    "replay",
                    1.0,
                    {
                        "observation": writer.history["observation"][-SEQUENCE_LENGTH:],
                        "action": writer.history["action"][-SEQUENCE_LENGTH:],
                    },
                )
    batch = client.sample_batch("replay", 5, timeout=SAFETY)
    actions, observations = batch.data
    assert actions.shape == (5, SEQUENCE_LENGTH) and observations.shape == (5, SEQUENCE_LENGTH, 3)
    for row, start in enumerate(range(0, 25, PERIOD)):
        steps = range(start, start + SEQUENCE_LENGTH)
        np.testing.assert_array_equal(actions[row], [action(0, t) for t in steps])
        np.testing.assert_array_equal(observations[row], [observation(0, t) for t in steps])


# --- whole episodes


@pytest.mark.parametrize("chunk_length", [None, 1, 5])
def test_whole_episodes(serve, chunk_length):
    # Acme's EpisodeAdder: one item per episode over all of its steps.
    server, client = serve(resound.Table.queue("episodes", 100))
    lengths = [3, 7, 1, 12]
    writer = client.trajectory_writer(max(lengths), max_chunk_length=chunk_length)
    for episode, length in enumerate(lengths):
        for t in range(length):
            writer.append(
                {
                    "observation": observation(episode, t),
                    "action": action(episode, t),
                    "discount": discount(length, t),
                }
            )
        assert writer.episode_steps == length
        writer.create_item(
            "episodes", float(length), {key: writer.history[key][:] for key in writer.history}
        )
        writer.end_episode()
    items = stored_items(server, "episodes")
    assert [item.priority for item in items] == [float(length) for length in lengths]
    episode_ids = [{chunk.episode_id for chunk in item.chunks} for item in items]
    assert all(len(ids) == 1 for ids in episode_ids)
    assert len(set.union(*episode_ids)) == len(lengths)
    samples = sample_all(client, "episodes", len(lengths))
    for episode, (length, (got_action, got_discount, got_obs)) in enumerate(
        zip(lengths, samples, strict=True)
    ):
        np.testing.assert_array_equal(got_obs, [observation(episode, t) for t in range(length)])
        np.testing.assert_array_equal(got_action, [action(episode, t) for t in range(length)])
        np.testing.assert_array_equal(got_discount, [discount(length, t) for t in range(length)])


def test_episodes_too_long_for_the_buffer_cannot_be_written_whole(serve):
    server, client = serve(resound.Table.queue("episodes", 100))
    writer = client.trajectory_writer(4)
    for t in range(6):
        writer.append({"observation": observation(0, t)})
    with pytest.raises(ValueError, match="cannot contain any None"):
        writer.history["observation"][:]
    writer.create_item("episodes", 1.0, {"observation": writer.history["observation"][-4:]})
    writer.end_episode()
    (data,) = sample_all(client, "episodes", 1)
    np.testing.assert_array_equal(data[0], [observation(0, t) for t in range(2, 6)])


# --- end_episode with and without clearing


def test_items_across_an_episode_boundary_need_kept_buffers(serve):
    server, client = serve(resound.Table.queue("q", 100))
    writer = client.trajectory_writer(4, max_chunk_length=2)
    for t in range(3):
        writer.append({"observation": observation(0, t)})
    writer.end_episode(clear_buffers=False)
    writer.append({"observation": observation(1, 0)})
    writer.create_item("q", 1.0, {"observation": writer.history["observation"][-3:]})
    writer.end_episode(clear_buffers=True)
    writer.append({"observation": observation(2, 0)})
    assert len(writer.history["observation"]) == 1  # the history starts afresh
    with pytest.raises(IndexError):
        writer.history["observation"][-2]
    writer.create_item("q", 1.0, {"observation": writer.history["observation"][-1:]})
    writer.end_episode()
    first, second = stored_items(server, "q")
    assert len({chunk.episode_id for chunk in first.chunks}) == 2
    assert len({chunk.episode_id for chunk in second.chunks}) == 1
    a, b = sample_all(client, "q", 2)
    np.testing.assert_array_equal(a[0], [observation(0, 1), observation(0, 2), observation(1, 0)])
    np.testing.assert_array_equal(b[0], [observation(2, 0)])


# --- one step, several tables


def test_one_step_feeds_items_of_two_tables(serve):
    # Acme writes the same steps to e.g. a replay table and a queue: the
    # items share the stored chunks.
    uniform = resound.Table(
        "replay",
        resound.selectors.Uniform(),
        resound.selectors.Fifo(),
        100,
        resound.rate_limiters.MinSize(1),
    )
    server, client = serve(uniform, resound.Table.queue("queue", 100))
    writer = client.trajectory_writer(2, max_chunk_length=2)
    for t in range(6):
        writer.append({"observation": observation(0, t)})
        if t % 2 == 1:
            trajectory = {"observation": writer.history["observation"][-2:]}
            writer.create_item("replay", 1.0, trajectory)
            writer.create_item("queue", 1.0, trajectory)
    writer.flush()
    replay, queue = stored_items(server, "replay"), stored_items(server, "queue")
    assert len(replay) == len(queue) == 3
    for a, b in zip(replay, queue, strict=True):
        assert a.trajectory == b.trajectory
        assert [c.key for c in a.chunks] == [c.key for c in b.chunks]
    for index, data in enumerate(sample_all(client, "queue", 3)):
        np.testing.assert_array_equal(
            data[0], [observation(0, 2 * index), observation(0, 2 * index + 1)]
        )
