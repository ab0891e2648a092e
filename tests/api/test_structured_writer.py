"""StructuredWriter: config building, conditions, validation, signatures, and
end-to-end writing through an embedded server (checked value by value)."""

from __future__ import annotations

import collections
import dataclasses

import numpy as np
import pytest

import resound
from resound import nest
from resound import structured_writer as sw
from resound.specs import TensorSpec

Condition = sw.Condition
ConditionProto = sw.ConditionProto
PatternNode = sw.PatternNode

STEP = {"a": None, "b": {"c": None, "d": [None, None]}}  # flat: a, c, d0, d1
REF = sw.create_reference_step(STEP)


# --------------------------------------------------------------------------
# Building patterns and configs.


def test_module_is_exported_under_both_names():
    assert resound.structured is resound.structured_writer is sw


def test_reference_step_indexes_leaves_in_flattening_order():
    Step = collections.namedtuple("Step", ["z", "y"])  # namedtuples keep field order
    ref = sw.create_reference_step({"b": Step(z=None, y=None), "a": None})
    assert ref["a"][-1].flat_source_index == 0
    assert ref["b"].z[-1].flat_source_index == 1
    assert ref["b"].y[-1].flat_source_index == 2
    assert REF["b"]["d"][1][-1].flat_source_index == 3


def test_reference_step_of_a_single_leaf():
    assert sw.create_reference_step(None)[-2] == PatternNode(0, stop=-2)


@pytest.mark.parametrize(
    "key, want",
    [
        (-1, PatternNode(2, stop=-1)),
        (np.int64(-3), PatternNode(2, stop=-3)),
        (slice(-3, None), PatternNode(2, start=-3)),
        (slice(-3, -1), PatternNode(2, start=-3, stop=-1)),
        (slice(-5, None, 2), PatternNode(2, start=-5, step=2)),
        (slice(None, -2), PatternNode(2, stop=-2)),
    ],
)
def test_reference_node_keys(key, want):
    node = REF["b"]["d"][0][key]
    assert node == want
    assert all(type(v) is int for v in (node.start, node.stop, node.step) if v is not None)


@pytest.mark.parametrize("key", ["x", 1.5, True, (1, 2), slice(-2.0, None)])
def test_reference_node_rejects_other_keys(key):
    with pytest.raises(ValueError, match="must be"):
        REF["a"][key]


def test_pattern_from_transform_applies_the_transform_to_the_reference_step():
    pattern = sw.pattern_from_transform(STEP, lambda s: {"x": s["b"]["c"][-2:], "y": s["a"][-1]})
    assert pattern == {"x": PatternNode(1, start=-2), "y": PatternNode(0, stop=-1)}


def test_create_config_flattens_pattern_and_records_structure():
    Out = collections.namedtuple("Out", ["second", "first"])
    pattern = Out(second=[REF["a"][-2]], first={"q": REF["b"]["c"][-3:]})
    config = sw.create_config(pattern, "table", [Condition.step_index() >= 2])
    assert config.flat == [PatternNode(0, stop=-2), PatternNode(1, start=-3)]
    assert config.pattern_structure == Out(second=[None], first={"q": None})
    assert type(config.pattern_structure) is Out
    assert config.table == "table"
    assert config.conditions == [ConditionProto(left="step_index", cmp="ge", ge=2)]
    assert config.priority == sw.constant_priority_fn(1.0)
    assert sw.unpack_pattern(config) == pattern


def test_create_config_priorities():
    pattern = [REF["a"][-1]]
    assert sw.create_config(pattern, "t", priority=2).priority.constant_fn.value == 2.0
    td = sw.td_error(0.5, STEP, lambda step: step["a"])
    assert sw.create_config(pattern, "t", priority=td).priority is td
    with pytest.raises(ValueError, match="priority must be"):
        sw.create_config(pattern, "t", priority="high")


def test_create_config_rejects_non_node_leaves_and_incomplete_conditions():
    with pytest.raises(ValueError, match=r"Pattern leaves must be PatternNode.*path \('x',\)"):
        sw.create_config({"x": 3}, "t")
    with pytest.raises(ValueError, match=r"position 1 is incomplete"):
        sw.create_config([REF["a"][-1]], "t", [Condition.is_end_episode(), Condition.step_index()])


def test_unpack_pattern_without_structure_is_the_flat_list():
    config = sw.Config(flat=[PatternNode(0, stop=-1), PatternNode(1, stop=-1)], table="t")
    assert config.pattern_structure is sw.NO_STRUCTURE
    assert sw.unpack_pattern(config) == config.flat


def test_unpack_pattern_of_a_leaf_pattern_is_the_node():
    config = sw.create_config(REF["a"][-1], "t")
    assert config.pattern_structure is None
    assert sw.unpack_pattern(config) == PatternNode(0, stop=-1)


def test_priority_builders():
    assert sw.constant_priority_fn(3) == sw.Priority(constant_fn=sw.ConstantPriorityFn(3.0))
    td = sw.td_error(0.9, STEP, lambda step: step["b"]["d"][1])
    assert td == sw.Priority(td_error=sw.TDError(0.9, 3))
    # A field picked from a reference step works too.
    assert sw.td_error(0.9, STEP, lambda _: REF["b"]["c"]).td_error.flat_source_index == 1
    with pytest.raises(ValueError, match="must select a leaf"):
        sw.td_error(0.9, STEP, lambda step: 7)
    with pytest.raises(ValueError, match="must be an int"):
        sw.td_error(0.9, STEP, lambda step: step["b"])


def test_configs_survive_pickle_and_deepcopy():
    import copy
    import pickle

    config = sw.create_config(
        {"x": REF["a"][-3:], "y": REF["b"]["c"][-1]},
        "t",
        [Condition.step_index() % 2 == 1, Condition.is_end_episode()],
        priority=sw.td_error(0.5, STEP, lambda s: s["a"]),
    )
    flat_only = sw.Config(flat=[PatternNode(0, stop=-1)], table="t")
    for original in (config, flat_only):
        for clone in (pickle.loads(pickle.dumps(original)), copy.deepcopy(original)):
            assert clone == original
            assert sw.unpack_pattern(clone) == sw.unpack_pattern(original)
    assert pickle.loads(pickle.dumps(flat_only)).pattern_structure is sw.NO_STRUCTURE


# --------------------------------------------------------------------------
# Condition encoding.


@pytest.mark.parametrize(
    "condition, want",
    [
        (Condition.step_index() == 3, dict(cmp="eq", eq=3)),
        (Condition.step_index() != 3, dict(cmp="eq", eq=3, inverse=True)),
        (Condition.step_index() >= 3, dict(cmp="ge", ge=3)),
        (Condition.step_index() > 3, dict(cmp="ge", ge=4)),
        (Condition.step_index() <= 3, dict(cmp="ge", ge=4, inverse=True)),
        (Condition.step_index() < 3, dict(cmp="ge", ge=3, inverse=True)),
        (Condition.step_index() % 4 == 1, dict(cmp="mod_eq", mod=4, eq=1)),
        (Condition.step_index() % 4 != 1, dict(cmp="mod_eq", mod=4, eq=1, inverse=True)),
    ],
)
def test_condition_operators(condition, want):
    assert condition == ConditionProto(left="step_index", **want)


def test_condition_lefts():
    assert (Condition.steps_since_applied() >= 2).left == "steps_since_applied"
    assert Condition.is_end_episode() == ConditionProto(left="is_end_episode", cmp="eq", eq=1)
    assert Condition.is_end_episode().is_end_episode
    data = Condition.data({"x": None, "done": [None, None]})  # flat: done0, done1, x
    assert (data["done"][1] == 1) == ConditionProto(
        left="flat_source_index", flat_source_index=1, cmp="eq", eq=1
    )
    assert (data["x"] < 0).flat_source_index == 2


def test_builders_are_reusable():
    base = Condition.step_index()
    mod = base % 3
    assert (base == 1).cmp == "eq"
    assert (mod == 1).cmp == "mod_eq"
    assert (base == 1).mod == 0


@pytest.mark.parametrize(
    "build",
    [
        lambda c: c % 3 >= 1,
        lambda c: c % 3 < 1,
        lambda c: c % 3 % 2,
        lambda c: c == 1.5,
        lambda c: c >= "1",
        lambda c: c > 2**31 - 1,
        lambda c: c % 2.0,
    ],
)
def test_condition_misuse_raises(build):
    with pytest.raises(ValueError):
        build(Condition.step_index())


def test_condition_builder_has_no_truth_value():
    with pytest.raises(TypeError, match="compare it"):
        bool(Condition.step_index())


# --------------------------------------------------------------------------
# Validation.


def _valid(**changes):
    config = sw.create_config(
        {"x": REF["a"][-2:]}, "t", [ConditionProto(left="buffer_length", cmp="ge", ge=2)]
    )
    return dataclasses.replace(config, **changes)


def test_valid_config_passes():
    sw.validate_config(_valid())


def _with_node(node):
    return _valid(flat=[node])


def _with_condition(condition):
    return _valid(conditions=[ConditionProto(left="buffer_length", cmp="ge", ge=5), condition])


@pytest.mark.parametrize(
    "config, message",
    [
        (_valid(flat=[]), "`flat` must not be empty"),
        (_valid(table=""), "`table` must be a non-empty str"),
        (_with_node(PatternNode(-1, stop=-1)), "`flat_source_index` must be >= 0 but got -1"),
        (_with_node(PatternNode(0)), "At least one of `start` and `stop` must be specified"),
        (_with_node(PatternNode(0, start=0)), "`start` must be < 0 but got 0"),
        (_with_node(PatternNode(0, start=-2, stop=1)), "`stop` must be <= 0 but got 1"),
        (_with_node(PatternNode(0, start=-2, stop=-2)), r"`stop` \(-2\) must be > `start` \(-2\)"),
        (_with_node(PatternNode(0, stop=0)), "`stop` must be < 0 when `start` isn't set"),
        (_with_node(PatternNode(0, stop=-1, step=1)), "`step` must only be set when `start`"),
        (_with_node(PatternNode(0, start=-2, step=0)), "`step` must be > 0 but got 0"),
        (_with_node(PatternNode(0, start=-2, step=-1)), "`step` must be > 0 but got -1"),
        (_with_node(PatternNode(0, start=-2.0)), "`start` must be an int"),
        (_with_node("a[-1]"), "`flat` must hold PatternNode"),
        (_with_condition(ConditionProto(cmp="eq")), "must specify a value for `left`"),
        (_with_condition(ConditionProto(left="step_index")), "must specify a value for `cmp`"),
        (_with_condition(ConditionProto(left="size", cmp="eq")), "`left` must be one of"),
        (_with_condition(ConditionProto(left="step_index", cmp="lt")), "`cmp` must be one of"),
        (
            _with_condition(
                ConditionProto(left="flat_source_index", flat_source_index=-1, cmp="eq")
            ),
            "flat_source_index must be >= 0 but got -1",
        ),
        (
            _with_condition(ConditionProto(left="step_index", cmp="mod_eq", mod=0)),
            "`mod_eq.mod` must be > 0 but got 0",
        ),
        (
            _with_condition(ConditionProto(left="step_index", cmp="mod_eq", mod=2, eq=-1)),
            "`mod_eq.eq` must be >= 0 but got -1",
        ),
        (
            _with_condition(ConditionProto(left="is_end_episode", cmp="eq", eq=0)),
            "must use `eq=1` when using `is_end_episode`",
        ),
        (
            _with_condition(ConditionProto(left="is_end_episode", cmp="eq", eq=1, inverse=True)),
            "must use `eq=1` when using `is_end_episode`",
        ),
        (
            _with_condition(ConditionProto(left="is_end_episode", cmp="ge", ge=1)),
            "must use `eq=1` when using `is_end_episode`",
        ),
        (_with_condition(Condition.step_index()), "position 1 is incomplete"),
        (_with_condition("step_index >= 1"), "must be a ConditionProto"),
        (
            _valid(conditions=[]),
            r"required buffer length condition `buffer_length >= 2`",
        ),
        (
            _valid(conditions=[ConditionProto(left="buffer_length", cmp="ge", ge=1)]),
            r"required buffer length condition `buffer_length >= 2`",
        ),
        (
            _valid(conditions=[ConditionProto(left="buffer_length", cmp="ge", ge=2, inverse=True)]),
            r"required buffer length condition `buffer_length >= 2`",
        ),
        (_valid(priority=sw.Priority()), "exactly one of `constant_fn` and `td_error`"),
        (_valid(priority=sw.constant_priority_fn(float("nan"))), "finite number"),
        (_valid(priority=sw.Priority(td_error=sw.TDError(1.5, 0))), r"must be in \[0, 1\]"),
        (_valid(priority=sw.Priority(td_error=sw.TDError(0.5, 1))), "no node of the pattern"),
        ("not a config", "Expected a structured_writer.Config"),
    ],
)
def test_validate_config_errors(config, message):
    with pytest.raises(ValueError, match=message):
        sw.validate_config(config)


def test_add_buffer_length_condition():
    config = sw.create_config({"x": REF["a"][-3:-1], "y": REF["b"]["c"][-2]}, "t")
    added = sw.add_buffer_length_condition(config)
    assert added.conditions == [ConditionProto(left="buffer_length", cmp="ge", ge=3)]
    assert config.conditions == []  # the original is untouched
    sw.validate_config(added)

    larger = ConditionProto(left="buffer_length", cmp="ge", ge=7)
    for present in (ConditionProto(left="buffer_length", cmp="ge", ge=3), larger):
        kept = sw.add_buffer_length_condition(dataclasses.replace(config, conditions=[present]))
        assert kept.conditions == [present]

    smaller = ConditionProto(left="buffer_length", cmp="ge", ge=2)
    topped = sw.add_buffer_length_condition(dataclasses.replace(config, conditions=[smaller]))
    assert topped.conditions == [smaller, ConditionProto(left="buffer_length", cmp="ge", ge=3)]


def test_prepare_configs_adds_conditions_and_names_the_bad_position():
    good = sw.create_config([REF["a"][-2]], "t")
    [prepared] = sw.prepare_configs([good])
    assert prepared.conditions[-1] == ConditionProto(left="buffer_length", cmp="ge", ge=2)
    bad = sw.create_config([PatternNode(0, start=-2, stop=-3)], "t")
    with pytest.raises(ValueError, match=r"^Invalid configuration at position 1: `stop` \(-3\)"):
        sw.prepare_configs([good, bad])
    with pytest.raises(ValueError, match="At least one config"):
        sw.prepare_configs([])


def test_required_keep_alive_refs():
    configs = [
        sw.create_config([REF["a"][-3:-1]], "t"),
        sw.create_config([REF["b"]["c"][-2], REF["a"][-5::2]], "t"),
    ]
    assert sw.required_keep_alive_refs(configs) == 5
    assert sw.required_keep_alive_refs([sw.create_config([REF["a"][-1]], "t")]) == 1


# --------------------------------------------------------------------------
# Signatures.

SPEC_STEP = {
    "a": np.zeros([3, 3], np.float32),
    "b": {"c": np.zeros([], np.int32), "d": [np.zeros([2], np.int8), np.zeros([6], np.int64)]},
}


def _signature(patterns, step_spec=SPEC_STEP):
    return sw.infer_signature([sw.create_config(p, "table") for p in patterns], step_spec)


def test_infer_signature_shapes_and_names():
    got = _signature(
        [
            {
                "last4": REF["a"][-4:],
                "odd": REF["a"][-5::2],
                "older": REF["a"][-3:-1],
                "x": {"y": REF["b"]["c"][-2]},
                "step3": REF["b"]["d"][0][-7:-1:3],
            }
        ]
    )
    assert got == {
        "last4": TensorSpec([4, 3, 3], np.float32, "last4"),
        "odd": TensorSpec([3, 3, 3], np.float32, "odd"),
        "older": TensorSpec([2, 3, 3], np.float32, "older"),
        "x": {"y": TensorSpec([], np.int32, "x/y")},
        "step3": TensorSpec([2, 2], np.int8, "step3"),
    }


def test_infer_signature_merges_leading_dimensions():
    got = _signature(
        [
            {"x": REF["a"][-3:-1], "y": REF["a"][-1], "z": REF["b"]["d"][1][-4:]},
            {"x": REF["a"][-2:], "y": REF["a"][-2], "z": REF["b"]["d"][1][-8::2]},
            {"x": REF["a"][-3:], "y": REF["a"][-3], "z": REF["b"]["d"][1][-7::2]},
        ]
    )
    assert got == {
        "x": TensorSpec([None, 3, 3], np.float32, "x"),
        "y": TensorSpec([3, 3], np.float32, "y"),
        "z": TensorSpec([4, 6], np.int64, "z"),
    }


def test_infer_signature_rank_one_leading_dim_differs():
    step = {"a": np.zeros([2], np.float32), "b": np.zeros([5], np.float32)}
    ref = sw.create_reference_step(step)
    got = _signature([{"x": ref["a"][-1]}, {"x": ref["b"][-1]}], step)
    assert got == {"x": TensorSpec([None], np.float32, "x")}


class _DuckSpec:  # like tf.TensorSpec / jax.ShapeDtypeStruct: only .shape and .dtype
    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, dtype


def test_infer_signature_accepts_any_spec_with_shape_and_dtype():
    Step = collections.namedtuple("Step", ["obs", "reward"])
    step = Step(obs=TensorSpec([None, 4], np.uint8, "ignored"), reward=_DuckSpec((), "float64"))
    ref = sw.create_reference_step(step)
    got = _signature([Step(obs=ref.obs[-2:], reward=ref.reward[-1])], step)
    assert got == Step(
        obs=TensorSpec([2, None, 4], np.uint8, "obs"),
        reward=TensorSpec([], np.float64, "reward"),
    )
    # Python scalars count as values.
    assert _signature([[sw.create_reference_step(None)[-3:]]], 1.0) == [
        TensorSpec([3], np.float64, "0")
    ]


def test_infer_signature_errors():
    with pytest.raises(ValueError, match=r"^At least one config must be provided\.$"):
        sw.infer_signature([], SPEC_STEP)
    with pytest.raises(ValueError, match=r"^All configs must have exactly the same pattern_str"):
        _signature([{"x": REF["a"][-1]}, {"y": REF["a"][-1]}])
    with pytest.raises(ValueError, match=r"same pattern_structure"):
        _signature([{"x": REF["a"][-1]}, [REF["a"][-1]]])
    configs = [sw.create_config({"x": REF["a"][-3:]}, name) for name in "cab"]
    with pytest.raises(
        ValueError,
        match=r"^All configs must target the same table but provided configs included a, b, c\.$",
    ):
        sw.infer_signature(configs, SPEC_STEP)
    with pytest.raises(ValueError, match=r"multiple dtypes at \('x',\)\. Got"):
        _signature([{"x": REF["a"][-1]}, {"x": REF["b"]["c"][-1]}])
    with pytest.raises(ValueError, match=r"incompatible shapes at \('x',\)\. Got"):
        _signature([{"x": REF["a"][-1]}, {"x": REF["a"][-2:]}])  # ranks differ
    step = {"a": np.zeros([1, 2], np.float32), "b": np.zeros([1, 3], np.float32)}
    ref = sw.create_reference_step(step)
    with pytest.raises(ValueError, match=r"incompatible shapes at \('x',\)"):
        _signature([{"x": ref["a"][-1]}, {"x": ref["b"][-1]}], step)
    with pytest.raises(ValueError, match="step_spec has only 1 leaves"):
        _signature([[PatternNode(4, stop=-1)]], {"a": np.zeros(1)})
    with pytest.raises(ValueError, match="no shape and dtype for field 0"):
        _signature([[PatternNode(0, stop=-1)]], {"a": None})


# --------------------------------------------------------------------------
# End to end: an embedded server, a real client and writer, no mocks.

TABLES = ("t", "t0", "t1", "t2")


@pytest.fixture
def server():
    tables = [
        resound.Table(
            name,
            resound.selectors.Fifo(),
            resound.selectors.Fifo(),
            1000,
            resound.rate_limiters.MinSize(1),
            max_times_sampled=1,  # each item is read once, in insertion order
        )
        for name in TABLES
    ]
    srv = resound.Server(tables, listen=False)
    yield srv
    srv.stop()


@pytest.fixture
def client(server):
    return server.in_process_client()


def samples(client, table="t"):
    """Every item of ``table`` (oldest first) as ReplaySample(info, flat data)."""
    size = client.server_info()[table].current_size
    return list(client.sample(table, size, emit_timesteps=False)) if size else []


def contents(client, table="t"):
    """Every item's flat data as nested Python lists."""
    return [[np.asarray(column).tolist() for column in s.data] for s in samples(client, table)]


def write(client, configs, steps, *, end_episode=True):
    with client.structured_writer(configs) as writer:
        for step in steps:
            writer.append(step)
        if end_episode:
            writer.end_episode()


LAST = sw.create_reference_step(None)[-1]


@pytest.mark.parametrize(
    "condition, num_steps, want_steps",
    [
        (Condition.step_index() <= 2, 10, [0, 1, 2]),
        (Condition.step_index() >= 5, 10, [5, 6, 7, 8, 9]),
        (Condition.step_index() == 3, 10, [3]),
        (Condition.step_index() != 3, 10, [0, 1, 2, 4, 5, 6, 7, 8, 9]),
        (Condition.step_index() > 7, 10, [8, 9]),
        (Condition.step_index() < 2, 10, [0, 1]),
        (Condition.step_index() % 3 == 0, 10, [0, 3, 6, 9]),
        (Condition.step_index() % 3 != 0, 10, [1, 2, 4, 5, 7, 8]),
        (Condition.steps_since_applied() >= 4, 10, [3, 7]),
        (Condition.steps_since_applied() >= 3, 10, [2, 5, 8]),
        (Condition.steps_since_applied() == 1, 4, [0, 1, 2, 3]),
        (Condition.is_end_episode(), 5, [4]),
    ],
)
def test_single_condition(client, condition, num_steps, want_steps):
    config = sw.create_config(LAST, "t", [condition])
    write(client, [config], range(num_steps))
    assert contents(client) == [[step] for step in want_steps]


def test_configs_are_applied_in_order_into_their_tables(client):
    configs = [
        sw.create_config(LAST, table, [Condition.step_index() % 3 == i])
        for i, table in enumerate(("t0", "t1", "t2"))
    ]
    write(client, configs, range(8))
    assert contents(client, "t0") == [[0], [3], [6]]
    assert contents(client, "t1") == [[1], [4], [7]]
    assert contents(client, "t2") == [[2], [5]]


STEP_VALUES = {
    "a": np.zeros([], np.float32),
    "b": {"c": np.zeros([2, 2], np.int32), "d": [np.zeros([3], np.int64), np.zeros([6], np.int64)]},
}


def _step(index):
    return nest.map_structure(lambda x: np.full_like(x, index), STEP_VALUES)


def test_trajectory_patterns_value_by_value(client):
    pattern = {
        "x": REF["a"][-3],  # squeezed single row
        "y": REF["b"]["c"][-2:],  # the last two rows
        "z": REF["b"]["d"][0][-1],
        "w": REF["b"]["d"][1][-4:-1:2],  # rows -4 and -2
    }
    config = sw.create_config(pattern, "t")
    write(client, [config], [_step(i) for i in range(6)])
    got = samples(client)
    assert len(got) == 3  # steps 3, 4 and 5 (buffer_length >= 4)
    for sample, newest in zip(got, (3, 4, 5), strict=True):
        w, x, y, z = sample.data  # flattening order: w, x, y, z
        np.testing.assert_array_equal(x, np.float32(newest - 2))
        assert x.shape == () and x.dtype == np.float32
        np.testing.assert_array_equal(
            y, np.stack([np.full([2, 2], newest - 1 + k) for k in (0, 1)])
        )
        assert y.dtype == np.int32 and y.shape == (2, 2, 2)
        np.testing.assert_array_equal(z, np.full([3], newest))
        np.testing.assert_array_equal(
            w, np.stack([np.full([6], newest - 3), np.full([6], newest - 1)])
        )


@pytest.mark.parametrize(
    "key, want",
    [
        (slice(-4, None), [[i - 3, i - 2, i - 1, i] for i in range(3, 10)]),
        (slice(-5, None, 2), [[i - 4, i - 2, i] for i in range(4, 10)]),
        (slice(-3, -1), [[i - 2, i - 1] for i in range(2, 10)]),
        (-2, [i - 1 for i in range(1, 10)]),
    ],
)
def test_slices_over_ten_steps(client, key, want):
    write(client, [sw.create_config([sw.create_reference_step(None)[key]], "t")], range(10))
    assert contents(client) == [[w] for w in want]


def test_infer_signature_matches_what_the_table_receives(client):
    step = {"x": np.zeros([2], np.float32)}
    ref = sw.create_reference_step(step)
    pattern = {"last4": ref["x"][-4:], "odd": ref["x"][-5::2], "one": ref["x"][-1]}
    config = sw.create_config(pattern, "t")
    signature = sw.infer_signature([config], step)
    write(client, [config], [{"x": np.full([2], i, np.float32)} for i in range(6)])
    got = samples(client)
    assert len(got) == 2
    for sample in got:
        for spec, column in zip(nest.flatten(signature), sample.data, strict=True):
            assert tuple(spec.shape) == np.shape(column)
            assert spec.dtype == np.asarray(column).dtype


# --- Acme-style n-step transitions.

Step = collections.namedtuple(
    "Step", ["observation", "action", "reward", "discount", "start_of_episode", "extras"]
)
Trajectory = Step
STEP_SPEC = Step(
    observation=np.zeros([2], np.float32),
    action=np.zeros([], np.int64),
    reward=np.zeros([], np.float32),
    discount=np.zeros([], np.float32),
    start_of_episode=np.zeros([], bool),
    extras=(),
)
NONE_STEP = Step(None, None, None, None, None, ())


def n_step_configs(n_step, table="t"):
    """Configs for n-step transitions: shorter ones at the start and end."""

    def pattern(n):
        ref = sw.create_reference_step(STEP_SPEC)
        return Trajectory(
            observation=ref.observation[-(n + 1) :: n],  # first and last
            action=ref.action[-(n + 1) : -n],
            reward=ref.reward[-(n + 1) : -1],
            discount=ref.discount[-(n + 1) : -1],
            start_of_episode=ref.start_of_episode[-(n + 1) : -n],
            extras=(),
        )

    start = [
        sw.create_config(pattern(n), table, [Condition.step_index() == n]) for n in range(1, n_step)
    ]
    base = [sw.create_config(pattern(n_step), table)]
    end = [
        sw.create_config(
            pattern(n), table, [Condition.is_end_episode(), Condition.step_index() != n]
        )
        for n in range(n_step - 1, 0, -1)
    ]
    return start + base + end


def _obs(episode, t):
    return np.array([100 * episode + t, -t], np.float32)


def run_acme_episode(writer, episode, length):
    """What Acme's StructuredAdder does: partial observation rows, full action rows."""
    writer.append(
        NONE_STEP._replace(observation=_obs(episode, 0), start_of_episode=True), partial_step=True
    )
    for t in range(length):
        writer.append(
            NONE_STEP._replace(
                action=np.int64(10 * episode + t),
                reward=np.float32(t + 0.5),
                discount=np.float32(1.0 if t < length - 1 else 0.0),
            )
        )
        writer.append(
            NONE_STEP._replace(observation=_obs(episode, t + 1), start_of_episode=False),
            partial_step=True,
        )
    # The last row is completed with zeros, then the episode ends.
    writer.append(
        NONE_STEP._replace(action=np.int64(0), reward=np.float32(0), discount=np.float32(0))
    )
    writer.end_episode()


@pytest.mark.parametrize(
    "lengths, want",
    [
        # (episode, first step, n) of each transition, in insertion order.
        ([5], [(0, 0, 1), (0, 0, 2), (0, 0, 3), (0, 1, 3), (0, 2, 3), (0, 3, 2), (0, 4, 1)]),
        ([2], [(0, 0, 1), (0, 0, 2), (0, 1, 1)]),
        (
            [3, 4],
            [(0, 0, 1), (0, 0, 2), (0, 0, 3), (0, 1, 2), (0, 2, 1)]
            + [(1, 0, 1), (1, 0, 2), (1, 0, 3), (1, 1, 3), (1, 2, 2), (1, 3, 1)],
        ),
    ],
)
def test_n_step_transitions(server, lengths, want):
    configs = n_step_configs(3)
    signature = sw.infer_signature(configs, STEP_SPEC)
    assert signature.observation == TensorSpec([2, 2], np.float32, "observation")
    assert signature.reward == TensorSpec([None], np.float32, "reward")
    assert signature.action == TensorSpec([1], np.int64, "action")
    client = server.in_process_client()
    with client.structured_writer(configs) as writer:
        for episode, length in enumerate(lengths):
            run_acme_episode(writer, episode, length)

    got = samples(client)
    assert len(got) == len(want)
    for sample, (episode, s, n) in zip(got, want, strict=True):
        item = nest.unflatten_as(Trajectory(*([None] * 5), extras=()), sample.data)
        np.testing.assert_array_equal(item.observation, [_obs(episode, s), _obs(episode, s + n)])
        np.testing.assert_array_equal(item.action, [10 * episode + s])
        np.testing.assert_array_equal(item.reward, [t + 0.5 for t in range(s, s + n)])
        last = lengths[episode] - 1
        np.testing.assert_array_equal(item.discount, [float(t < last) for t in range(s, s + n)])
        np.testing.assert_array_equal(item.start_of_episode, [s == 0])


# --- Sequences of length 10, period 5 (Acme's TRUNCATE behaviour).


def sequence_configs(length, period, table="t"):
    ref = sw.create_reference_step(None)
    target = (length - 1) % period
    configs = [
        sw.create_config(
            ref[-length:],
            table,
            [Condition.step_index() >= length - 1, Condition.step_index() % period == target],
        )
    ]
    for x in range(period):  # the remainder of long episodes
        if x != target:
            unpadded = length - (target - x) % period
            configs.append(
                sw.create_config(
                    ref[-unpadded:],
                    table,
                    [
                        Condition.is_end_episode(),
                        Condition.step_index() % period == x,
                        Condition.step_index() >= length,
                    ],
                )
            )
    for x in range(1, length):  # whole episodes shorter than `length`
        configs.append(
            sw.create_config(
                ref[-x:], table, [Condition.is_end_episode(), Condition.step_index() == x - 1]
            )
        )
    return configs


def test_overlapping_sequences_truncated_at_episode_ends(client):
    lengths = (23, 7, 10, 14)
    with client.structured_writer(sequence_configs(10, 5)) as writer:
        for episode, length in enumerate(lengths):
            for t in range(length):
                writer.append(np.int32(1000 * episode + t))
            writer.end_episode()

    def seq(episode, first, last):
        return [1000 * episode + t for t in range(first, last + 1)]

    assert contents(client) == [
        [seq(0, 0, 9)],
        [seq(0, 5, 14)],
        [seq(0, 10, 19)],
        [seq(0, 15, 22)],  # truncated at the end of the episode
        [seq(1, 0, 6)],  # the whole (short) episode
        [seq(2, 0, 9)],  # ends aligned with the period: nothing more
        [seq(3, 0, 9)],
        [seq(3, 5, 13)],
    ]


@pytest.mark.parametrize("clear_buffers", [True, False])
def test_end_episode_clear_buffers(client, clear_buffers):
    ref = sw.create_reference_step(None)
    configs = [
        sw.create_config(ref[-10:], "t", [Condition.step_index() % 5 == 4]),
        sw.create_config(ref[-3:], "t1", [Condition.is_end_episode()]),
    ]
    with client.structured_writer(configs) as writer:
        for t in range(12):
            writer.append(t)
        writer.end_episode(clear_buffers=clear_buffers)
        for t in range(8):
            writer.append(100 + t)
        writer.end_episode(clear_buffers=clear_buffers)

    sequences = [[list(range(10))]]
    if not clear_buffers:  # step index 4 of episode 2 reaches back into episode 1
        sequences.append([[7, 8, 9, 10, 11, 100, 101, 102, 103, 104]])
    assert contents(client, "t") == sequences
    assert contents(client, "t1") == [[[9, 10, 11]], [[105, 106, 107]]]


def test_whole_episodes(client):
    ref = sw.create_reference_step({"obs": None, "act": None})
    configs = [
        sw.create_config(
            {"obs": ref["obs"][-n:], "act": ref["act"][-n:]},
            "t",
            [Condition.is_end_episode(), Condition.step_index() == n - 1],
        )
        for n in range(1, 7)
    ]
    with client.structured_writer(configs) as writer:
        for episode, length in enumerate((3, 6, 1, 8)):
            for t in range(length):
                writer.append({"obs": np.float64(episode + t / 10), "act": np.int8(t)})
            writer.end_episode()
    # The 8-step episode is longer than any config and yields nothing.
    assert contents(client) == [
        [[0, 1, 2], [0.0, 0.1, 0.2]],
        [[0, 1, 2, 3, 4, 5], [1.0, 1.1, 1.2, 1.3, 1.4, 1.5]],
        [[0], [2.0]],
    ]


# --- Partial steps.


def test_partial_steps_fill_one_row_and_apply_a_config_once_per_step(client):
    ref = sw.create_reference_step({"a": None, "b": None})
    every_step = sw.create_config({"a": ref["a"][-1]}, "t0")
    pair = sw.create_config({"a": ref["a"][-1], "b": ref["b"][-1]}, "t1")
    counted = sw.create_config(ref["a"][-1], "t2", [Condition.steps_since_applied() >= 2])
    with client.structured_writer([every_step, pair, counted]) as writer:
        assert not writer.step_is_open
        for t in range(4):
            writer.append({"a": t, "b": None}, partial_step=True)
            assert writer.step_is_open
            writer.append({"a": None, "b": 10 * t}, partial_step=True)
            writer.append({"a": None, "b": None})
            assert not writer.step_is_open
        writer.end_episode()
    # One item per step although the config was evaluated after each append.
    assert contents(client, "t0") == [[0], [1], [2], [3]]
    # Applied once the row had both fields (on the second append of the step).
    assert contents(client, "t1") == [[0, 0], [1, 10], [2, 20], [3, 30]]
    # steps_since_applied counts steps, not appends.
    assert contents(client, "t2") == [[1], [3]]


def test_step_is_open_is_reset_by_end_episode(client):
    config = sw.create_config([r[-1] for r in sw.create_reference_step([None, None])], "t")
    writer = client.structured_writer([config])
    writer.append([1, None], partial_step=True)
    assert writer.step_is_open
    writer.end_episode()
    assert not writer.step_is_open
    writer.append([None, 2])  # a new step: the earlier value is gone
    writer.append([3, 4])
    writer.flush()
    assert contents(client) == [[3, 4]]


def test_a_field_set_twice_in_a_step_is_an_error(client):
    config = sw.create_config({"x": sw.create_reference_step({"x": None})["x"][-1]}, "t")
    writer = client.structured_writer([config])
    writer.append({"x": 1}, partial_step=True)
    with pytest.raises(ValueError, match=r"Field 0 \(path=\('x',\)\) has already been set"):
        writer.append({"x": 2})
    writer.append({"x": None})
    writer.flush()
    assert contents(client) == [[1]]


def test_configs_skip_steps_whose_rows_lack_a_value(client):
    ref = sw.create_reference_step({"a": None, "b": None})
    config = sw.create_config({"a": ref["a"][-2:], "b": ref["b"][-1]}, "t")
    steps = [
        {"a": 0, "b": 0},
        {"a": 1, "b": None},
        {"a": 2, "b": 2},
        {"a": None, "b": 3},
        {"a": 4, "b": 4},
        {"a": 5, "b": 5},
    ]
    write(client, [config], steps)
    assert contents(client) == [[[1, 2], 2], [[4, 5], 5]]


def test_steps_without_any_used_value_still_count(client):
    ref = sw.create_reference_step({"a": None, "unused": None})
    config = sw.create_config(ref["a"][-1], "t", [Condition.step_index() % 3 == 0])
    steps = [
        {"a": None, "unused": 1},
        {"a": None, "unused": 2},
        {"a": 2, "unused": 3},
        {"a": 3, "unused": 4},
        {"a": 4, "unused": 5},
    ]
    write(client, [config], steps)
    assert contents(client) == [[3]]  # step index 3; index 0 would be a=2


def test_buffer_length_is_capped_by_the_longest_column_history(client):
    # As in Reverb, buffer_length is the length of the longest kept column
    # history, and a column keeps only as many rows as some node reads.
    ref = sw.create_reference_step({"a": None, "b": None})
    wants_five = ConditionProto(left="buffer_length", cmp="ge", ge=5)
    short = sw.create_config(ref["a"][-2:], "t0", [wants_five])
    steps = [{"a": i, "b": 10 * i} for i in range(8)]
    write(client, [short], steps)
    assert contents(client, "t0") == []  # two rows kept: never 5

    longer = sw.create_config(ref["b"][-6], "t1")  # column b keeps 6 rows
    write(client, [short, longer], steps)
    assert contents(client, "t0") == [[[i - 1, i]] for i in range(4, 8)]
    assert contents(client, "t1") == [[10 * (i - 5)] for i in range(5, 8)]


# --- Data conditions.


@pytest.mark.parametrize(
    "step_spec, pattern_fn, condition_fn, steps, want",
    [
        (  # the condition reads a field no pattern uses
            {"a": None, "b": None},
            lambda x: {"old_a": x["a"][-2]},
            lambda x: x["b"] > 10,
            [{"a": i, "b": b} for i, b in zip(range(1, 6), (11, 10, 11, 9, 12), strict=True)],
            [[2], [4]],
        ),
        (
            {"a": None},
            lambda x: {"last_two_a": x["a"][-2:]},
            lambda x: x["a"] == 3,
            [{"a": np.int32(v)} for v in (0, 2, 3, 4, 5)],
            [[[2, 3]]],
        ),
        (
            {"a": None},
            lambda x: {"last_two_a": x["a"][-2:]},
            lambda x: x["a"] != 4,
            [{"a": np.int64(v)} for v in (1, 2, 3, 4, 5)],
            [[[1, 2]], [[2, 3]], [[4, 5]]],
        ),
        (
            {"a": None, "b": None},
            lambda x: {"last_a": x["a"][-1]},
            lambda x: x["b"] == 1,
            [
                {"a": i, "b": b}
                for i, b in zip(range(1, 6), (True, False, False, True, False), strict=True)
            ],
            [[1], [4]],
        ),
        (  # C's remainder: -3 % 3 == 0, -2 % 3 != 1 (it is -2)
            {"a": None, "b": None},
            lambda x: x["a"][-1],
            lambda x: x["b"] % 3 == 1,
            [{"a": i, "b": np.int16(b)} for i, b in enumerate((-3, -2, 1, 4, -1))],
            [[2], [3]],
        ),
        (  # unsigned and None values
            {"a": None, "b": None},
            lambda x: x["a"][-1],
            lambda x: x["b"] >= 2,
            [{"a": i, "b": b} for i, b in enumerate((np.uint8(3), None, np.uint8(1), np.uint8(2)))],
            [[0], [3]],
        ),
    ],
)
def test_data_conditions(client, step_spec, pattern_fn, condition_fn, steps, want):
    config = sw.create_config(
        sw.pattern_from_transform(step_spec, pattern_fn),
        "t",
        [condition_fn(Condition.data(step_spec))],
    )
    write(client, [config], steps, end_episode=False)
    assert contents(client) == want


def test_data_condition_on_non_integer_or_non_scalar_values_is_false_and_logged(client, caplog):
    step = {"a": None, "flag": None}
    ref = sw.create_reference_step(step)
    config = sw.create_config(ref["a"][-1], "t", [Condition.data(step)["flag"] == 1])
    steps = [{"a": 0, "flag": np.float32(1)}, {"a": 1, "flag": np.float32(2)}]
    with caplog.at_level("ERROR", logger="resound.structured_writer"):
        write(client, [config], steps)
    assert contents(client) == []
    assert "invalid data type float32" in caplog.text

    caplog.clear()
    with caplog.at_level("ERROR", logger="resound.structured_writer"):
        write(
            client,
            [config],
            [{"a": 5, "flag": np.array([1, 1])}, {"a": 6, "flag": np.array([1, 0])}],
        )
    assert contents(client) == []
    assert "does not contain scalar values" in caplog.text


# --- Priorities.


def test_constant_priority(client):
    config = sw.create_config(LAST, "t", priority=sw.constant_priority_fn(2.5))
    write(client, [config], range(2))
    assert [s.info.priority for s in samples(client)] == [2.5, 2.5]


def test_td_error_priorities(client):
    step = {"obs": None, "td": None}
    ref = sw.create_reference_step(step)
    weight = 0.75
    sequence = sw.create_config(
        {"obs": ref["obs"][-3:], "td": ref["td"][-3:]},
        "t0",
        priority=sw.td_error(weight, step, lambda s: s["td"]),
    )
    strided = sw.create_config(
        {"td": ref["td"][-5::2]}, "t1", priority=sw.td_error(0.0, step, lambda s: s["td"])
    )
    single = sw.create_config(
        {"td": ref["td"][-1]}, "t2", priority=sw.td_error(1.0, step, lambda s: s["td"])
    )
    tds = [0.5, -2.0, 1.0, -4.0, 0.25]
    write(client, [sequence, strided, single], [{"obs": i, "td": td} for i, td in enumerate(tds)])

    magnitudes = [abs(float(td)) for td in tds]

    def expected(window, w):
        return w * max(window) + (1 - w) * sum(window) / len(window)

    got = [s.info.priority for s in samples(client, "t0")]
    want = [expected(magnitudes[k - 2 : k + 1], weight) for k in range(2, 5)]
    np.testing.assert_allclose(got, want)
    # Without the `td` node in the first position: the td column is found by source index.
    got = [s.info.priority for s in samples(client, "t1")]
    np.testing.assert_allclose(got, [sum(magnitudes[0:5:2]) / 3])
    got = [s.info.priority for s in samples(client, "t2")]
    np.testing.assert_allclose(got, magnitudes)


def _td_config():
    step = {"td": None}
    return sw.create_config(
        sw.create_reference_step(step)["td"][-2:],
        "t",
        priority=sw.td_error(0.5, step, lambda s: s["td"]),
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_td_error_dtypes(client, dtype):
    write(client, [_td_config()], [{"td": dtype(-3)}, {"td": dtype(1)}])
    [sample] = samples(client)
    assert sample.info.priority == 0.5 * 3 + 0.5 * 2


@pytest.mark.parametrize("value", [np.zeros([2], np.float32), np.int8(1), np.float16(1)])
def test_td_error_needs_scalar_float_or_int32_int64(client, value):
    writer = client.structured_writer([_td_config()])
    writer.append({"td": value})
    with pytest.raises(ValueError, match="td_error priority needs scalar float32, float64, int32"):
        writer.append({"td": value})


# --- Errors, flush, forwarding.


def test_flattened_length_must_not_change(client):
    writer = client.structured_writer([sw.create_config(REF["a"][-1], "t")])
    writer.append({"a": 1, "b": {"c": None, "d": [None, None]}})
    with pytest.raises(
        ValueError, match="Flattened data has an unexpected length, got 2 but wanted 4"
    ):
        writer.append({"a": 1, "b": None})


def test_data_shorter_than_the_configs_need(client):
    writer = client.structured_writer([sw.create_config(REF["b"]["d"][1][-1], "t")])
    with pytest.raises(
        ValueError, match="read field 3 of the step but the flattened data has only 2"
    ):
        writer.append({"a": 1, "b": 2})


def test_dtype_and_shape_errors_name_the_flat_index_and_path(client):
    config = sw.create_config([REF["a"][-1], REF["b"]["c"][-1]], "t")
    writer = client.structured_writer([config])
    writer.append({"a": np.float32(1), "b": {"c": np.zeros([2]), "d": [None, None]}})
    with pytest.raises(
        ValueError,
        match=r"^Tensor of wrong dtype provided for column 0 \(path=\('a',\)\)\. Got",
    ):
        writer.append({"a": np.int32(1), "b": {"c": np.zeros([2]), "d": [None, None]}})
    with pytest.raises(
        ValueError,
        match=r"^Tensor of incompatible shape provided for column 1 \(path=\('b', 'c'\)\)\.",
    ):
        writer.append({"a": np.float32(1), "b": {"c": np.zeros([3]), "d": [None, None]}})


def test_unused_fields_are_not_written(client):
    # A field no config reads never reaches the trajectory writer, so its values
    # may change dtype and shape freely.
    ref = sw.create_reference_step({"used": None, "unused": None})
    config = sw.create_config(ref["used"][-1], "t")
    steps = [{"used": 1, "unused": "text"}, {"used": 2, "unused": np.zeros([5, 5])}]
    write(client, [config], steps)
    assert contents(client) == [[1], [2]]


def test_flush_arguments(client):
    writer = client.structured_writer([sw.create_config(LAST, "t")])
    with pytest.raises(ValueError, match="block_until_num_items must be >= 0, got -1"):
        writer.flush(-1)
    writer.append(1)
    writer.flush(0, timeout_ms=10_000)
    assert contents(client) == [[1]]


def test_leaving_the_with_block_flushes(client):
    with client.structured_writer([sw.create_config(LAST, "t")]) as writer:
        writer.append(7)
    assert contents(client) == [[7]]


def test_invalid_configs_are_rejected_by_the_client(client):
    with pytest.raises(ValueError, match=r"^Invalid configuration at position 1: `step` must"):
        client.structured_writer(
            [
                sw.create_config(LAST, "t"),
                sw.Config(flat=[PatternNode(0, stop=-1, step=2)], table="t"),
            ]
        )
    with pytest.raises(ValueError, match="At least one config"):
        client.structured_writer([])


def test_writer_validates_configs_it_is_given_directly(client):
    trajectory_writer = client.trajectory_writer(1)
    with pytest.raises(ValueError, match="position 0: Config does not contain the required buffer"):
        sw.StructuredWriter(trajectory_writer, [sw.create_config(LAST, "t")])
