"""Tests of SumTree and of PrioritizedSelector against a pure-Python reference.

Property tests use hypothesis with derandomize=True, so runs are reproducible.
"""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from resound import _core

# When a property fails, hypothesis imports libcst to suggest a patch, and libcst
# triggers mypy_extensions' DeprecationWarning; with filterwarnings=error that
# would turn the failure report into an INTERNALERROR that aborts the session.
pytestmark = pytest.mark.filterwarnings(
    "ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"
)

PROPERTY_SETTINGS = settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


# --------------------------------------------------------------------------
# SumTree basics
# --------------------------------------------------------------------------


def test_new_tree_is_empty() -> None:
    tree = _core.SumTree()
    assert len(tree) == 0
    assert tree.total == 0.0
    assert tree.capacity >= 1
    with pytest.raises(RuntimeError):
        tree.find(0.0)
    with pytest.raises(ValueError, match="index"):
        tree.set(0, 1.0)
    with pytest.raises(ValueError, match="index"):
        tree.get(0)


def test_set_get_total() -> None:
    tree = _core.SumTree()
    tree.resize(5)
    assert len(tree) == 5
    assert tree.capacity >= 5
    assert [tree.get(i) for i in range(5)] == [0.0] * 5
    for i, w in enumerate([1.0, 2.5, 0.0, 4.0, 0.5]):
        tree.set(i, w)
    assert [tree.get(i) for i in range(5)] == [1.0, 2.5, 0.0, 4.0, 0.5]
    assert tree.total == 8.0
    tree.set(1, 0.25)
    assert tree.get(1) == 0.25
    assert tree.total == 5.75


def test_capacity_is_a_power_of_two_that_fits() -> None:
    tree = _core.SumTree()
    for size in [1, 2, 3, 5, 8, 9, 100, 1025]:
        tree.resize(size)
        assert len(tree) == size
        capacity = tree.capacity
        assert capacity >= size
        assert capacity & (capacity - 1) == 0


def test_resize_keeps_weights_and_zeroes_dropped_leaves() -> None:
    tree = _core.SumTree()
    tree.resize(3)
    for i in range(3):
        tree.set(i, float(i + 1))
    tree.resize(40)  # grows the capacity
    assert [tree.get(i) for i in range(3)] == [1.0, 2.0, 3.0]
    assert all(tree.get(i) == 0.0 for i in range(3, 40))
    assert tree.total == 6.0
    tree.set(39, 10.0)
    assert tree.total == 16.0
    assert tree.find(6.0) == 39
    tree.resize(2)  # drops leaves 2..39 from the total
    assert len(tree) == 2
    assert tree.total == 3.0
    with pytest.raises(ValueError, match="index"):
        tree.get(2)
    tree.resize(40)  # leaves come back empty
    assert tree.get(2) == 0.0
    assert tree.get(39) == 0.0
    assert tree.total == 3.0


def test_set_rejects_bad_weights_and_indices() -> None:
    tree = _core.SumTree()
    tree.resize(4)
    tree.set(2, 1.5)
    for w in [-1.0, -1e-300, math.nan, math.inf, -math.inf]:
        with pytest.raises(ValueError, match="weight"):
            tree.set(2, w)
    with pytest.raises(ValueError, match="index"):
        tree.set(4, 1.0)
    with pytest.raises(ValueError, match="index"):
        tree.get(4)
    with pytest.raises(TypeError):
        tree.set(-1, 1.0)
    assert tree.get(2) == 1.5
    assert tree.total == 1.5


def test_find_requires_positive_total() -> None:
    tree = _core.SumTree()
    tree.resize(3)
    with pytest.raises(RuntimeError):
        tree.find(0.0)
    tree.set(1, 2.0)
    assert tree.find(0.0) == 1
    tree.set(1, 0.0)
    with pytest.raises(RuntimeError):
        tree.find(0.0)


def test_clear() -> None:
    tree = _core.SumTree()
    tree.resize(10)
    tree.set(9, 3.0)
    tree.clear()
    assert len(tree) == 0
    assert tree.total == 0.0
    with pytest.raises(RuntimeError):
        tree.find(0.0)
    tree.resize(2)
    assert tree.get(1) == 0.0
    assert tree.total == 0.0


def test_find_boundaries() -> None:
    tree = _core.SumTree()
    weights = [0.0, 2.0, 0.0, 0.0, 1.0, 3.0, 0.0]
    tree.resize(len(weights))
    for i, w in enumerate(weights):
        tree.set(i, w)
    # Ranges: leaf 1 -> [0, 2), leaf 4 -> [2, 3), leaf 5 -> [3, 6).
    assert tree.find(0.0) == 1
    assert tree.find(1.999) == 1
    assert tree.find(2.0) == 4
    assert tree.find(2.5) == 4
    assert tree.find(3.0) == 5
    assert tree.find(5.999) == 5
    assert tree.find(6.0) == 5  # at the total: last leaf with weight
    assert tree.find(1e9) == 5


@pytest.mark.parametrize("size", [10, 100, 1000])
def test_find_at_or_beyond_total_in_a_deep_tree(size: int) -> None:
    # Same contract as above with enough leaves for several inner levels.
    tree = _core.SumTree()
    tree.resize(size)
    for i, w in [(3, 1.0), (size // 2, 2.0), (size // 2 + 1, 4.0)]:
        tree.set(i, w)
    assert tree.total == 7.0
    assert tree.find(0.0) == 3
    assert tree.find(1.0) == size // 2
    assert tree.find(3.0) == size // 2 + 1
    assert tree.find(6.5) == size // 2 + 1
    assert tree.find(7.0) == size // 2 + 1  # at the total: last leaf with weight
    assert tree.find(7.5) == size // 2 + 1
    assert tree.find(1e9) == size // 2 + 1


# --------------------------------------------------------------------------
# SumTree.find against prefix sums
# --------------------------------------------------------------------------


def expected_find(weights: list[float], target: float) -> int:
    prefix = 0.0
    for i, w in enumerate(weights):
        if w > 0 and prefix <= target < prefix + w:
            return i
        prefix += w
    return max(i for i, w in enumerate(weights) if w > 0)


# Weights are multiples of 1/8 below 2**20 so that every partial sum, in any
# order, is exact: the tree and the Python prefix sums agree bit for bit.
exact_weights = st.lists(
    st.one_of(st.just(0.0), st.integers(1, 8 * 1000).map(lambda n: n / 8)),
    min_size=1,
    max_size=70,
).filter(lambda ws: any(w > 0 for w in ws))


def build_tree(weights: list[float]) -> _core.SumTree:
    tree = _core.SumTree()
    tree.resize(len(weights))
    for i, w in enumerate(weights):
        tree.set(i, w)
    return tree


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(weights=exact_weights, data=st.data())
def test_find_matches_prefix_sums(weights: list[float], data: st.DataObject) -> None:
    tree = build_tree(weights)
    total = math.fsum(weights)
    assert tree.total == total
    assert len(tree) == len(weights)
    prefixes = [math.fsum(weights[:i]) for i in range(len(weights) + 1)]
    # Arbitrary targets, every range boundary exactly, and targets beyond the total.
    targets = data.draw(st.lists(st.floats(0.0, total * 1.25), min_size=1, max_size=20))
    targets += prefixes + [total, total * 2, math.nextafter(total, 0.0)]
    for target in targets:
        index = tree.find(target)
        assert index == expected_find(weights, target), (target, index)
        assert weights[index] > 0


@PROPERTY_SETTINGS
@given(
    size=st.integers(1, 40),
    ops=st.lists(
        st.tuples(st.integers(0, 1000), st.integers(0, 8 * 1000).map(lambda n: n / 8)),
        max_size=80,
    ),
)
def test_set_sequences_match_list(size: int, ops: list[tuple[int, float]]) -> None:
    tree = _core.SumTree()
    tree.resize(size)
    reference = [0.0] * size
    for index, weight in ops:
        index %= size
        tree.set(index, weight)
        reference[index] = weight
        assert tree.total == math.fsum(reference)
    assert [tree.get(i) for i in range(size)] == reference
    if any(w > 0 for w in reference):
        for i, w in enumerate(reference):
            if w > 0:
                prefix = math.fsum(reference[:i])
                assert tree.find(prefix) == i
                assert tree.find(prefix + w / 2) == i


# --------------------------------------------------------------------------
# PrioritizedSelector against a pure-Python reference
# --------------------------------------------------------------------------

KEYS = st.integers(0, 24)
PRIORITIES = st.one_of(
    st.just(0.0),
    st.sampled_from([0.5, 1.0, 2.0, 3.0]),
    st.floats(1e-3, 1e3, allow_nan=False, allow_infinity=False),
)
EXPONENTS = st.one_of(
    st.sampled_from([0.0, 0.5, 1.0, 2.0]),
    st.floats(0.0, 3.0, allow_nan=False, allow_infinity=False),
)
INVALID_PRIORITIES = st.sampled_from([-1.0, -1e-9, math.nan, math.inf, -math.inf])


class PrioritizedSelectorMachine(RuleBasedStateMachine):
    """Random insert/update/delete/sample sequences checked against a dict."""

    def __init__(self) -> None:
        super().__init__()
        self.selector: _core.PrioritizedSelector | None = None
        self.reference: dict[int, float] = {}
        self.exponent = 0.0

    @initialize(exponent=EXPONENTS, seed=st.integers(0, 2**64 - 1))
    def setup(self, exponent: float, seed: int) -> None:
        self.exponent = exponent
        self.selector = _core.PrioritizedSelector(exponent, seed=seed)

    def weight(self, priority: float) -> float:
        return 0.0 if priority == 0 else priority**self.exponent

    def expected(self) -> dict[int, float]:
        w = {k: self.weight(p) for k, p in self.reference.items()}
        total = math.fsum(w.values())
        if total == 0:
            return {k: 1.0 / len(w) for k in w}
        return {k: v / total for k, v in w.items()}

    @rule(key=KEYS, priority=PRIORITIES)
    def insert(self, key: int, priority: float) -> None:
        if key in self.reference:
            with pytest.raises(ValueError):
                self.selector.insert(key, priority)
        else:
            self.selector.insert(key, priority)
            self.reference[key] = priority

    @rule(key=KEYS, priority=PRIORITIES)
    def update(self, key: int, priority: float) -> None:
        if key in self.reference:
            self.selector.update(key, priority)
            self.reference[key] = priority
        else:
            with pytest.raises(KeyError):
                self.selector.update(key, priority)

    @precondition(lambda self: self.reference)
    @rule(data=st.data(), priority=PRIORITIES)
    def update_present(self, data: st.DataObject, priority: float) -> None:
        key = data.draw(st.sampled_from(sorted(self.reference)))
        self.selector.update(key, priority)
        self.reference[key] = priority

    @rule(key=KEYS)
    def delete(self, key: int) -> None:
        if key in self.reference:
            self.selector.delete(key)
            del self.reference[key]
        else:
            with pytest.raises(KeyError):
                self.selector.delete(key)

    @precondition(lambda self: self.reference)
    @rule(data=st.data())
    def delete_present(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.reference)))
        self.selector.delete(key)
        del self.reference[key]

    @rule(key=KEYS, priority=INVALID_PRIORITIES, as_update=st.booleans())
    def invalid_priority(self, key: int, priority: float, as_update: bool) -> None:
        with pytest.raises(ValueError):
            if as_update:
                self.selector.update(key, priority)
            else:
                self.selector.insert(key, priority)

    @rule(times=st.integers(1, 5))
    def sample(self, times: int) -> None:
        if not self.reference:
            with pytest.raises(RuntimeError):
                self.selector.sample()
            return
        expected = self.expected()
        all_zero = all(self.weight(p) == 0 for p in self.reference.values())
        for _ in range(times):
            key, probability = self.selector.sample()
            assert key in self.reference
            if not all_zero:
                assert self.weight(self.reference[key]) > 0
            assert probability == pytest.approx(expected[key], rel=1e-9)

    @invariant()
    def matches_reference(self) -> None:
        if self.selector is None:
            return
        assert len(self.selector) == len(self.reference)
        for key in range(25):
            assert (key in self.selector) == (key in self.reference)
        expected = self.expected()
        for key, p in expected.items():
            assert self.selector.probability(key) == pytest.approx(p, rel=1e-9, abs=0.0)
        for key in range(25):
            if key not in self.reference:
                with pytest.raises(KeyError):
                    self.selector.probability(key)


@pytest.mark.slow
def test_prioritized_selector_matches_reference() -> None:
    run_state_machine_as_test(
        PrioritizedSelectorMachine,
        settings=settings(PROPERTY_SETTINGS, stateful_step_count=40),
    )


# --------------------------------------------------------------------------
# Drift
# --------------------------------------------------------------------------


def test_no_drift_after_many_updates() -> None:
    rng = random.Random(20240601)
    size = 1000
    tree = _core.SumTree()
    tree.resize(size)
    # 150k updates mixing weights from 1e-6 to 1e15: with sums adjusted by
    # deltas, the huge weights would leave rounding residue in the total.
    for _ in range(150_000):
        tree.set(rng.randrange(size), 10.0 ** rng.uniform(-6, 15))
    leaves = [rng.uniform(0.5, 1.0) for _ in range(size)]
    for i, w in enumerate(leaves):
        tree.set(i, w)
    assert [tree.get(i) for i in range(size)] == leaves
    exact = math.fsum(leaves)
    assert tree.total == pytest.approx(exact, rel=1e-12)
    # Inner sums are right too: the middle of every leaf's range finds that leaf.
    prefix = 0.0
    for i, w in enumerate(leaves):
        assert tree.find(prefix + w / 2) == i
        prefix += w


def test_prioritized_selector_no_drift_after_many_updates() -> None:
    rng = random.Random(7)
    exponent = 0.9
    selector = _core.PrioritizedSelector(exponent, seed=1)
    size = 500
    for k in range(size):
        selector.insert(k, 1.0)
    for _ in range(100_000):
        selector.update(rng.randrange(size), 10.0 ** rng.uniform(-3, 15))
    priorities = {k: rng.uniform(0.0, 2.0) for k in range(size)}
    for k, p in priorities.items():
        selector.update(k, p)
    weights = {k: p**exponent for k, p in priorities.items()}
    total = math.fsum(weights.values())
    for k in range(size):
        assert selector.probability(k) == pytest.approx(weights[k] / total, rel=1e-9)
    assert math.fsum(selector.probability(k) for k in range(size)) == pytest.approx(1.0, rel=1e-12)
