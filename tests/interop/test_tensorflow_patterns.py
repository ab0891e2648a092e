"""resound.PatternDataset (Reverb's): structured-writer patterns applied to a
tf.data.Dataset of steps, checked against Reverb's examples and against the
items resound's StructuredWriter inserts into real servers (embedded and
gRPC), eagerly and in graph mode."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import resound  # noqa: E402
from resound import structured_writer as sw  # noqa: E402
from resound.datasets import tf_patterns  # noqa: E402

SAFETY = 20.0


def as_numpy(dataset) -> list:
    return list(dataset.as_numpy_iterator())


def steps_of(**fields) -> tf.data.Dataset:
    return tf.data.Dataset.from_tensor_slices(fields)


class TestReverbExamples:
    """The cases of Reverb's own PatternDataset tests."""

    def test_pattern_and_condition(self):
        pattern = sw.pattern_from_transform(step_structure=None, transform=lambda x: x[-1])
        config = sw.create_config(pattern, "t", conditions=[sw.Condition.step_index() <= 2])
        steps = tf.data.Dataset.from_tensor_slices(
            {
                "observation": {"field_0": [0, 1, 2, 3], "field_1": [0, 1, 2, 3]},
                "action": [10, 11, 12, 13],
                "is_last": [False, False, False, False],
            }
        )
        out = resound.PatternDataset(steps, [config], True, lambda x: x["is_last"])
        # Field 0 of the flattened step is `action` (keys sorted).
        assert as_numpy(out) == [10, 11, 12]
        assert out.element_spec == tf.TensorSpec([], tf.int32)

    def test_keeps_the_step_shape(self):
        steps = tf.data.Dataset.from_tensor_slices([[0, 0], [1, 1], [2, 2], [3, 3]])
        ref = sw.create_reference_step(steps.element_spec)
        config = sw.create_config(ref[-1], "t", conditions=[sw.Condition.step_index() <= 2])
        out = resound.PatternDataset(steps, [config], True, lambda x: False)
        assert out.element_spec == tf.TensorSpec([2], tf.int32)
        np.testing.assert_array_equal(as_numpy(out), [[0, 0], [1, 1], [2, 2]])

    def test_a_slice_adds_a_time_axis(self):
        steps = tf.data.Dataset.from_tensor_slices([[0, 0], [1, 1], [2, 2], [3, 3]])
        ref = sw.create_reference_step(steps.element_spec)
        out = resound.PatternDataset(
            steps, [sw.create_config(ref[-2:], "t")], True, lambda x: False
        )
        assert out.element_spec == tf.TensorSpec([2, 2], tf.int32)
        np.testing.assert_array_equal(
            as_numpy(out), [[[0, 0], [1, 1]], [[1, 1], [2, 2]], [[2, 2], [3, 3]]]
        )

    def test_nested_result(self):
        steps = steps_of(
            observation={"field_0": [0, 1, 2, 3], "field_1": [4, 5, 6, 7]},
            action=[0, 1, 2, 3],
            is_last=[False] * 4,
        )
        ref = sw.create_reference_step(steps.element_spec)
        obs = ref["observation"]
        pattern = {
            "observation": {"field_0": obs["field_0"][-2], "field_1": obs["field_1"][-2]},
            "next_observation": {"field_0": obs["field_0"][-1], "field_1": obs["field_1"][-1]},
        }
        out = resound.PatternDataset(
            steps, [sw.create_config(pattern, "t")], True, lambda x: x["is_last"]
        )
        got = as_numpy(out)
        assert [g["observation"]["field_0"] for g in got] == [0, 1, 2]
        assert [g["observation"]["field_1"] for g in got] == [4, 5, 6]
        assert [g["next_observation"]["field_0"] for g in got] == [1, 2, 3]
        assert [g["next_observation"]["field_1"] for g in got] == [5, 6, 7]

    @pytest.mark.parametrize("respect", [True, False])
    def test_episode_boundaries(self, respect):
        steps = steps_of(
            data=[0, 1, 2, 3, 4, 5, 6], is_last=[False, False, False, True, False, False, True]
        )
        ref = sw.create_reference_step(steps.element_spec)
        config = sw.create_config({"data": ref["data"][-2], "next": ref["data"][-1]}, "t")
        out = resound.PatternDataset(steps, [config], respect, lambda x: x["is_last"])
        pairs = [(int(p["data"]), int(p["next"])) for p in as_numpy(out)]
        if respect:  # no pair spans two episodes
            assert pairs == [(0, 1), (1, 2), (2, 3), (4, 5), (5, 6)]
        else:
            assert pairs == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6)]

    def test_with_info_adds_a_sample_info_of_zeros(self):
        pattern = sw.pattern_from_transform(step_structure=None, transform=lambda x: x[-1])
        config = sw.create_config(pattern, "t", conditions=[sw.Condition.step_index() <= 2])
        steps = steps_of(data=[0, 1, 2, 3])
        out = tf_patterns.pattern_dataset_with_info(steps, [config], True, lambda _: False)
        samples = list(out)
        assert [int(s.data) for s in samples] == [0, 1, 2]
        for sample in samples:
            assert isinstance(sample, resound.ReplaySample)
            assert [t.dtype for t in sample.info] == [
                tf.uint64,
                tf.float64,
                tf.int64,
                tf.float64,
                tf.int32,
            ]
            assert [int(t) for t in sample.info] == [0, 0, 0, 0, 0]


# Steps of episodes of these lengths, then 3 steps of an unfinished one.
EPISODES = [5, 1, 2, 7, 4]
TRAILING = 3


def example_steps() -> tf.data.Dataset:
    lengths = [*EPISODES, TRAILING]
    total = sum(lengths)
    last = np.zeros(total, bool)
    last[np.cumsum(EPISODES) - 1] = True
    t = np.arange(total)
    return steps_of(
        obs=np.stack([t, -t], axis=1).astype(np.float32),
        act=t.astype(np.int64),
        flag=(t % 3 == 0).astype(np.int32),
        text=np.array([b"s%d\x00" % i for i in t], object),
        last=last,
        unused=np.zeros([total, 5], np.uint8),
    )


def example_configs(step_spec) -> list[sw.Config]:
    """Configs over every kind of condition, in increasing history (so the
    buffer-length conditions equal the StructuredWriter's)."""
    ref = sw.create_reference_step(step_spec)
    data = sw.Condition.data(step_spec)

    def pattern(obs, act):
        return {"obs": obs, "act": act, "text": ref["text"][-1]}

    return [
        sw.create_config(
            pattern(ref["obs"][-2:], ref["act"][-1]), "q", [sw.Condition.step_index() % 2 == 1]
        ),
        sw.create_config(
            pattern(ref["obs"][-3:], ref["act"][-2]), "q", [sw.Condition.is_end_episode()]
        ),
        sw.create_config(pattern(ref["obs"][-3::2], ref["act"][-1]), "q", [data["flag"] == 1]),
        sw.create_config(
            pattern(ref["obs"][-4:], ref["act"][-1]), "q", [sw.Condition.steps_since_applied() >= 3]
        ),
    ]


Serve = Callable[[], resound.Client]


@pytest.fixture(params=["embedded", "grpc"])
def serve(request: pytest.FixtureRequest) -> Iterator[Serve]:
    """serve() -> a client of a new server with a queue table 'q', embedded
    (in-process) or over gRPC on a 127.0.0.1 port the server picks."""
    servers: list[resound.Server] = []

    def make() -> resound.Client:
        if request.param == "embedded":
            server = resound.Server([resound.Table.queue("q", 1000)], listen=False)
            servers.append(server)
            return server.in_process_client()
        server = resound.Server([resound.Table.queue("q", 1000)])
        servers.append(server)
        return resound.Client(f"127.0.0.1:{server.port}", transport="grpc")

    yield make
    for server in servers:
        server.stop()


def written_items(client: resound.Client, steps, configs, clear_buffers: bool) -> list[list]:
    """The flat data of the items a StructuredWriter inserts for ``steps``, in order."""
    with client.structured_writer(configs) as writer:
        for step in steps.as_numpy_iterator():
            writer.append(step)
            if step["last"]:
                writer.end_episode(clear_buffers=clear_buffers)
        writer.flush()
    size = client.server_info()["q"].current_size
    return [list(s.data) for s in client.sample("q", size, emit_timesteps=False)]


@pytest.mark.parametrize("respect", [True, False])
def test_same_items_as_the_structured_writer(serve, respect):
    steps = example_steps()
    configs = example_configs(steps.element_spec)
    expected = written_items(serve(), steps, configs, clear_buffers=respect)
    assert len(expected) > 10

    out = resound.PatternDataset(steps, configs, respect, lambda step: step["last"])
    assert out.element_spec == {
        "act": tf.TensorSpec([], tf.int64),
        "obs": tf.TensorSpec([None, 2], tf.float32),  # lengths 2, 3, 2 and 4
        "text": tf.TensorSpec([], tf.string),
    }
    got = [tf.nest.flatten(item) for item in as_numpy(out)]
    assert len(got) == len(expected)
    for got_item, expected_item in zip(got, expected, strict=True):
        for got_leaf, expected_leaf in zip(got_item, expected_item, strict=True):
            np.testing.assert_array_equal(got_leaf, expected_leaf)
    # Each config contributed.
    lengths = {len(item[1]) for item in got}
    assert lengths == {2, 3, 4}


def test_built_and_iterated_in_graph_mode():
    steps = example_steps()
    configs = example_configs(steps.element_spec)
    eager = [
        tf.nest.flatten(item)
        for item in as_numpy(
            resound.PatternDataset(steps, configs, True, lambda step: step["last"])
        )
    ]

    # Per episode, inside flat_map (TensorFlow traces the function: graph mode).
    episode_ids = tf.data.Dataset.from_tensor_slices(
        np.repeat(np.arange(len(EPISODES) + 1), [*EPISODES, TRAILING])
    )
    keyed = tf.data.Dataset.zip((steps, episode_ids))

    def patterns_of(episode):
        episode_steps = keyed.filter(lambda _, e: e == episode).map(lambda step, _: step)
        return resound.PatternDataset(episode_steps, configs, True, lambda step: step["last"])

    per_episode = tf.data.Dataset.range(len(EPISODES) + 1).flat_map(patterns_of)
    got = [tf.nest.flatten(item) for item in as_numpy(per_episode)]
    assert len(got) == len(eager)
    for got_item, eager_item in zip(got, eager, strict=True):
        for got_leaf, eager_leaf in zip(got_item, eager_item, strict=True):
            np.testing.assert_array_equal(got_leaf, eager_leaf)

    # Built and consumed inside a tf.function.
    @tf.function
    def total_act():
        dataset = resound.PatternDataset(steps, configs, True, lambda step: step["last"])
        return dataset.reduce(tf.constant(0, tf.int64), lambda total, item: total + item["act"])

    assert int(total_act()) == sum(int(item[0]) for item in eager)


def test_a_short_config_after_a_long_one_waits_for_the_long_history():
    steps = steps_of(x=np.arange(6))
    ref = sw.create_reference_step(steps.element_spec)
    short = sw.create_config(ref["x"][-1], "t")
    long = sw.create_config(ref["x"][-3], "t")
    short_first = resound.PatternDataset(steps, [short, long], True, lambda _: False)
    long_first = resound.PatternDataset(steps, [long, short], True, lambda _: False)
    # As Reverb's PatternDataset: the buffer length a config waits for is the
    # longest history of it and the configs before it.
    assert as_numpy(short_first) == [0, 1, 2, 0, 3, 1, 4, 2, 5, 3]
    assert as_numpy(long_first) == [0, 2, 1, 3, 2, 4, 3, 5]
    assert short.conditions == [] and long.conditions == []  # not modified


def test_each_iterator_has_its_own_writer_state():
    # Steps without end: an iterator whose input ran out may release its
    # state early (tf.data reads ahead in the background), which would make
    # the count below depend on timing.
    steps = tf.data.Dataset.range(1 << 40).map(lambda i: {"x": i})
    ref = sw.create_reference_step(steps.element_spec)
    dataset = resound.PatternDataset(
        steps, [sw.create_config(ref["x"][-2:], "t")], True, lambda _: False
    )
    before = len(tf_patterns._states)
    first, second = iter(dataset), iter(dataset)
    a = [next(first).numpy().tolist() for _ in range(100)]
    b = [next(second).numpy().tolist() for _ in range(150)]
    assert len(tf_patterns._states) == before + 2
    a += [next(first).numpy().tolist() for _ in range(100)]
    assert a == [[i, i + 1] for i in range(200)]
    assert b == a[:150]
    del first, second
    assert len(tf_patterns._states) == before  # released with the iterators


def test_fields_no_config_reads_may_change_shape():
    def generate():
        for i in range(4):
            yield {"x": np.int64(i), "image": np.zeros([i + 1, 2], np.uint8)}

    steps = tf.data.Dataset.from_generator(
        generate,
        output_signature={
            "x": tf.TensorSpec([], tf.int64),
            "image": tf.TensorSpec([None, 2], tf.uint8),
        },
    )
    ref = sw.create_reference_step(steps.element_spec)
    out = resound.PatternDataset(
        steps, [sw.create_config(ref["x"][-1], "t")], True, lambda _: False
    )
    assert as_numpy(out) == [0, 1, 2, 3]


def test_a_read_field_that_changes_shape_is_an_invalid_argument(monkeypatch):
    monkeypatch.setattr(tf_patterns, "_MAX_STEPS_PER_FEED", 1)  # one step per feed

    def generate():
        for i in range(4):
            yield np.zeros([1 if i < 2 else 2], np.float32)

    steps = tf.data.Dataset.from_generator(
        generate, output_signature=tf.TensorSpec([None], tf.float32)
    )
    ref = sw.create_reference_step(steps.element_spec)
    out = resound.PatternDataset(steps, [sw.create_config(ref[-1], "t")], True, lambda _: False)
    assert out.element_spec == tf.TensorSpec([None], tf.float32)
    iterator = iter(out)
    assert next(iterator).shape == (1,)
    assert next(iterator).shape == (1,)
    with pytest.raises(tf.errors.InvalidArgumentError, match="wrong shape provided for field 0"):
        next(iterator)


class TestBadArguments:
    def setup_method(self):
        self.steps = steps_of(x=np.arange(4), done=[False] * 4)
        self.ref = sw.create_reference_step(self.steps.element_spec)
        self.config = sw.create_config(self.ref["x"][-1], "t")

    @pytest.mark.parametrize(
        "is_end",
        [lambda step: step["x"], lambda step: tf.stack([step["done"], step["done"]])],
        ids=["int", "vector"],
    )
    def test_is_end_of_episode_must_return_a_scalar_bool(self, is_end):
        with pytest.raises(ValueError, match="`is_end_of_episode` must return `bool`"):
            resound.PatternDataset(self.steps, [self.config], True, is_end)

    def test_input_must_be_a_dataset(self):
        with pytest.raises(ValueError, match="input_dataset must be a tf.data.Dataset"):
            resound.PatternDataset([1, 2], [self.config], True, lambda _: False)

    def test_configs_must_be_configs(self):
        with pytest.raises(ValueError, match=r"configs\[0\] must be a"):
            resound.PatternDataset(self.steps, ["x[-1]"], True, lambda _: False)
        with pytest.raises(ValueError, match="At least one config"):
            resound.PatternDataset(self.steps, [], True, lambda _: False)

    def test_an_invalid_config_is_named(self):
        bad = sw.create_config(self.ref["x"][-1:-2], "t")  # start >= stop
        with pytest.raises(ValueError, match="Invalid configuration at position 1"):
            resound.PatternDataset(self.steps, [self.config, bad], True, lambda _: False)

    def test_configs_must_share_the_table(self):
        other = sw.create_config(self.ref["x"][-1], "other")
        with pytest.raises(ValueError, match="must target the same table"):
            resound.PatternDataset(self.steps, [self.config, other], True, lambda _: False)


def test_is_a_tf_data_dataset_class():
    steps = steps_of(x=np.arange(3))
    ref = sw.create_reference_step(steps.element_spec)
    out = resound.PatternDataset(
        steps, [sw.create_config(ref["x"][-1], "t")], True, lambda _: False
    )
    assert isinstance(out, tf.data.Dataset)
    assert isinstance(out, resound.PatternDataset)
    assert resound.PatternDataset is tf_patterns.PatternDataset
    # Transformations keep working on it.
    np.testing.assert_array_equal(as_numpy(out.map(lambda x: x * 2).batch(3))[0], [0, 2, 4])


def test_without_tensorflow_the_class_says_how_to_get_it():
    code = (
        "import sys; sys.modules['tensorflow'] = None\n"
        "import resound.datasets.tf_patterns as patterns\n"
        "try:\n"
        "    patterns.PatternDataset\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=SAFETY
    )
    assert result.returncode == 0, result.stderr
    assert "pip install tensorflow" in result.stdout
