"""Tests of the item selectors in resound._core (docs/semantics.md §3,
docs/compatibility.md item 6).

Random selectors are built with fixed seeds, so every statistical check below is
deterministic; the tolerances are still chosen so that a correct implementation
passes for any seed with overwhelming probability, while a wrong distribution
(e.g. a wrong priority exponent) fails.
"""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest

from resound import _core

KINDS = ["uniform", "prioritized", "fifo", "lifo", "min_heap", "max_heap"]
DETERMINISTIC_KINDS = ["fifo", "lifo", "min_heap", "max_heap"]
RANDOM_KINDS = ["uniform", "prioritized"]
BAD_PRIORITIES = [math.nan, math.inf, -math.inf]
BAD_KEYS = [-1, 2**64, 2**70, 1.5, "1", None]

# A cell is rejected when its count is more than Z_BOUND standard deviations
# away from its expectation. For a correct sampler and a handful of cells the
# chance of that is below 1e-5 per test, whatever the seed.
Z_BOUND = 5.0


def make(kind: str, exponent: float = 1.0, seed: int | None = 1234) -> _core.ItemSelector:
    if kind == "prioritized":
        return _core.make_selector(kind, exponent, seed=seed)
    if kind == "uniform":
        return _core.make_selector(kind, seed=seed)
    return _core.make_selector(kind)


def draw(selector: _core.ItemSelector, n: int) -> tuple[Counter, dict[int, set[float]]]:
    """Samples n times; returns counts per key and the probabilities reported per key."""
    counts: Counter = Counter()
    reported: dict[int, set[float]] = {}
    for _ in range(n):
        key, probability = selector.sample()
        counts[key] += 1
        reported.setdefault(key, set()).add(probability)
    return counts, reported


def max_z(counts: Counter, expected: dict[int, float], n: int) -> float:
    """Largest |count - n p| / sd over the expected keys (inf if a p == 0 key was drawn)."""
    worst = 0.0
    for key in set(counts) | set(expected):
        p = expected.get(key, 0.0)
        if p <= 0.0 or p >= 1.0:
            if counts[key] != round(n * p):
                return math.inf
            continue
        sd = math.sqrt(n * p * (1.0 - p))
        worst = max(worst, abs(counts[key] - n * p) / sd)
    return worst


def weights(priorities: dict[int, float], exponent: float) -> dict[int, float]:
    return {k: 0.0 if p == 0 else p**exponent for k, p in priorities.items()}


def expected_probabilities(priorities: dict[int, float], exponent: float) -> dict[int, float]:
    w = weights(priorities, exponent)
    total = math.fsum(w.values())
    if total == 0:
        return {k: 1.0 / len(w) for k in w}
    return {k: v / total for k, v in w.items()}


def drain(selector: _core.ItemSelector) -> list[int]:
    """Samples and deletes until empty: the order in which the selector gives keys up."""
    order = []
    while len(selector):
        key, probability = selector.sample()
        assert probability == 1.0
        order.append(key)
        selector.delete(key)
    return order


# --------------------------------------------------------------------------
# Construction, options, repr
# --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_make_selector_options(kind: str) -> None:
    s = make(kind, exponent=0.75, seed=99)
    options = s.options
    assert options.kind == kind
    assert options.is_deterministic == (kind in DETERMINISTIC_KINDS)
    if kind == "prioritized":
        assert options.priority_exponent == 0.75
    if kind in RANDOM_KINDS:
        assert options.seed == 99
    else:
        assert options.seed is None
    assert len(s) == 0
    assert options == _core.SelectorOptions(
        kind,
        0.75 if kind == "prioritized" else 0.0,
        99 if kind in RANDOM_KINDS else None,
    )


def test_reprs() -> None:
    assert repr(make("uniform")) == "UniformSelector()"
    assert repr(make("fifo")) == "FifoSelector()"
    assert repr(make("lifo")) == "LifoSelector()"
    assert repr(make("min_heap")) == "HeapSelector(min_heap=True)"
    assert repr(make("max_heap")) == "HeapSelector(min_heap=False)"
    assert repr(make("prioritized", exponent=0.6)) == "PrioritizedSelector(priority_exponent=0.6)"


def test_unseeded_random_selectors_have_no_seed() -> None:
    assert _core.make_selector("uniform").options.seed is None
    assert _core.make_selector("prioritized", 1.0).options.seed is None
    assert _core.PrioritizedSelector(1.0).options.seed is None


def test_prioritized_selector_constructed_directly() -> None:
    s = _core.PrioritizedSelector(0.5, seed=3)
    assert isinstance(s, _core.ItemSelector)
    assert s.options.kind == "prioritized"
    assert s.options.priority_exponent == 0.5
    assert s.options.seed == 3
    s.insert(1, 4.0)
    s.insert(2, 16.0)
    assert s.probability(1) == pytest.approx(2.0 / 6.0, rel=1e-12)
    assert s.probability(2) == pytest.approx(4.0 / 6.0, rel=1e-12)


def test_make_selector_rejects_unknown_kind() -> None:
    with pytest.raises(ValueError, match="kind"):
        _core.make_selector("random")
    with pytest.raises(ValueError, match="kind"):
        _core.SelectorOptions("MinHeap")


@pytest.mark.parametrize("exponent", [-0.5, -1e-300, math.nan, math.inf, -math.inf])
def test_bad_priority_exponent(exponent: float) -> None:
    with pytest.raises(ValueError, match="priority_exponent"):
        _core.make_selector("prioritized", exponent)
    with pytest.raises(ValueError, match="priority_exponent"):
        _core.PrioritizedSelector(exponent)
    with pytest.raises(ValueError, match="priority_exponent"):
        _core.SelectorOptions("prioritized", exponent)


# --------------------------------------------------------------------------
# Errors shared by every selector
# --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_duplicate_insert_is_rejected_and_changes_nothing(kind: str) -> None:
    s = make(kind)
    s.insert(7, 2.0)
    s.insert(8, 1.0)
    with pytest.raises(ValueError, match="7"):
        s.insert(7, 5.0)
    assert len(s) == 2
    assert 7 in s
    assert 8 in s
    if kind == "prioritized":
        assert s.probability(7) == pytest.approx(2.0 / 3.0, rel=1e-12)
    if kind == "fifo":
        assert s.sample() == (7, 1.0)
    if kind in ("lifo", "min_heap"):
        assert s.sample() == (8, 1.0)
    if kind == "max_heap":
        assert s.sample() == (7, 1.0)


@pytest.mark.parametrize("kind", KINDS)
def test_update_and_delete_of_missing_key(kind: str) -> None:
    s = make(kind)
    with pytest.raises(KeyError):
        s.update(1, 1.0)
    with pytest.raises(KeyError):
        s.delete(1)
    s.insert(1, 1.0)
    s.delete(1)
    with pytest.raises(KeyError):
        s.delete(1)
    with pytest.raises(KeyError):
        s.update(1, 2.0)
    assert len(s) == 0


@pytest.mark.parametrize("kind", KINDS)
def test_sample_empty_raises(kind: str) -> None:
    s = make(kind)
    with pytest.raises(RuntimeError):
        s.sample()
    s.insert(1, 1.0)
    s.delete(1)
    with pytest.raises(RuntimeError):
        s.sample()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("priority", BAD_PRIORITIES)
def test_non_finite_priorities_are_rejected(kind: str, priority: float) -> None:
    s = make(kind)
    with pytest.raises(ValueError, match="priority"):
        s.validate_priority(priority)
    with pytest.raises(ValueError, match="priority"):
        s.insert(1, priority)
    assert len(s) == 0
    assert 1 not in s

    s.insert(1, 3.0)
    s.insert(2, 1.0)
    with pytest.raises(ValueError, match="priority"):
        s.update(2, priority)
    assert len(s) == 2
    # The failed update left everything as it was.
    if kind == "prioritized":
        assert s.probability(2) == pytest.approx(0.25, rel=1e-12)
    if kind == "min_heap":
        assert s.sample() == (2, 1.0)
    if kind == "max_heap":
        assert s.sample() == (1, 1.0)


@pytest.mark.parametrize("kind", KINDS)
def test_validate_priority_accepts_finite(kind: str) -> None:
    s = make(kind)
    for p in [0.0, 1.0, 1e-300, 1e300]:
        s.validate_priority(p)
    assert len(s) == 0


@pytest.mark.parametrize("priority", [-1.0, -1e-300, -0.5])
def test_negative_priority_rejected_by_prioritized_only(priority: float) -> None:
    s = make("prioritized")
    with pytest.raises(ValueError, match="priority"):
        s.validate_priority(priority)
    with pytest.raises(ValueError, match="priority"):
        s.insert(1, priority)
    assert len(s) == 0
    s.insert(1, 1.0)
    with pytest.raises(ValueError, match="priority"):
        s.update(1, priority)
    assert s.probability(1) == 1.0

    for kind in DETERMINISTIC_KINDS + ["uniform"]:
        other = make(kind)
        other.validate_priority(priority)
        other.insert(1, priority)
        other.update(1, priority * 2)
        assert len(other) == 1


def test_negative_zero_priority_is_zero() -> None:
    s = make("prioritized")
    s.insert(1, -0.0)
    s.insert(2, 1.0)
    assert s.probability(1) == 0.0
    assert s.probability(2) == 1.0


def test_priority_overflowing_the_exponent_is_rejected() -> None:
    s = make("prioritized", exponent=2.0)
    s.insert(1, 1e150)  # 1e300: still finite
    with pytest.raises(ValueError, match="overflow"):
        s.validate_priority(1e200)
    with pytest.raises(ValueError, match="overflow"):
        s.insert(2, 1e200)
    with pytest.raises(ValueError, match="overflow"):
        s.update(1, 1e200)
    assert len(s) == 1
    assert 2 not in s
    assert s.probability(1) == 1.0
    # The same priority is fine with a smaller exponent.
    small = make("prioritized", exponent=0.5)
    small.insert(2, 1e200)
    assert small.probability(2) == 1.0


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("key", BAD_KEYS)
def test_bad_keys_are_rejected(kind: str, key: object) -> None:
    s = make(kind)
    s.insert(5, 1.0)
    with pytest.raises(ValueError, match="key"):
        s.insert(key, 1.0)
    with pytest.raises(ValueError, match="key"):
        s.update(key, 1.0)
    with pytest.raises(ValueError, match="key"):
        s.delete(key)
    with pytest.raises(ValueError, match="key"):
        key in s  # noqa: B015
    if kind == "prioritized":
        with pytest.raises(ValueError, match="key"):
            s.probability(key)
    assert len(s) == 1


@pytest.mark.parametrize("kind", KINDS)
def test_full_range_of_keys(kind: str) -> None:
    s = make(kind)
    big = 2**64 - 1
    s.insert(big, 1.0)
    s.insert(0, 1.0)
    assert big in s
    assert 0 in s
    assert 1 not in s
    keys = {s.sample()[0] for _ in range(50)} if kind in RANDOM_KINDS else {s.sample()[0]}
    assert keys <= {0, big}
    s.update(big, 2.0)
    s.delete(big)
    assert big not in s
    assert s.sample()[0] == 0


@pytest.mark.parametrize("kind", KINDS)
def test_contains_and_len(kind: str) -> None:
    s = make(kind)
    for k in range(10):
        s.insert(k, float(k + 1))
        assert len(s) == k + 1
    for k in (0, 5, 9):
        s.delete(k)
    assert len(s) == 7
    assert [k for k in range(12) if k in s] == [1, 2, 3, 4, 6, 7, 8]


@pytest.mark.parametrize("kind", KINDS)
def test_clear(kind: str) -> None:
    s = make(kind)
    for k in range(5):
        s.insert(k, float(k + 1))
    s.clear()
    assert len(s) == 0
    assert all(k not in s for k in range(5))
    with pytest.raises(RuntimeError):
        s.sample()
    with pytest.raises(KeyError):
        s.delete(1)
    # The same keys can be inserted again and behave as fresh items.
    s.insert(3, 2.0)
    s.insert(1, 1.0)
    assert len(s) == 2
    first = {"fifo": 3, "lifo": 1, "min_heap": 1, "max_heap": 3}
    if kind in first:
        assert s.sample() == (first[kind], 1.0)
    if kind == "prioritized":
        assert s.probability(3) == pytest.approx(2.0 / 3.0, rel=1e-12)


# --------------------------------------------------------------------------
# Uniform
# --------------------------------------------------------------------------


def test_uniform_distribution_and_probability() -> None:
    s = make("uniform", seed=2024)
    keys = [10, 20, 30, 40, 50, 60, 70, 80]
    # Priorities are ignored.
    for i, k in enumerate(keys):
        s.insert(k, float(10**i))
    n = 40_000
    counts, reported = draw(s, n)
    assert set(counts) == set(keys)
    for k in keys:
        assert reported[k] == {1.0 / len(keys)}
    expected = {k: 1.0 / len(keys) for k in keys}
    assert max_z(counts, expected, n) < Z_BOUND
    # The test has the power to see a modestly skewed distribution.
    skewed = {
        k: (1.2 if i == 0 else (1.0 - 0.2 / (len(keys) - 1))) / len(keys)
        for i, k in enumerate(keys)
    }
    assert max_z(counts, skewed, n) > Z_BOUND


def test_uniform_updates_change_nothing() -> None:
    s = make("uniform", seed=5)
    for k in range(4):
        s.insert(k, 1.0)
    s.update(0, 1e9)
    s.update(1, 0.0)
    n = 20_000
    counts, reported = draw(s, n)
    assert all(r == {0.25} for r in reported.values())
    assert max_z(counts, {k: 0.25 for k in range(4)}, n) < Z_BOUND


@pytest.mark.parametrize("removed", [[0], [4], [9], [0, 9], [3, 4, 5], [0, 2, 4, 6, 8]])
def test_uniform_after_deletes(removed: list[int]) -> None:
    s = make("uniform", seed=77)
    for k in range(10):
        s.insert(k, 1.0)
    for k in removed:
        s.delete(k)
    remaining = [k for k in range(10) if k not in removed]
    n = 20_000
    counts, reported = draw(s, n)
    assert set(counts) == set(remaining)
    assert all(r == {1.0 / len(remaining)} for r in reported.values())
    assert max_z(counts, {k: 1.0 / len(remaining) for k in remaining}, n) < Z_BOUND
    # Deleted keys can come back.
    for k in removed:
        s.insert(k, 1.0)
    counts, _ = draw(s, 2_000)
    assert set(counts) == set(range(10))


def test_uniform_single_item() -> None:
    s = make("uniform", seed=1)
    s.insert(42, 0.0)
    assert [s.sample() for _ in range(10)] == [(42, 1.0)] * 10


# --------------------------------------------------------------------------
# Seeds
# --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", RANDOM_KINDS)
def test_same_seed_same_sequence(kind: str) -> None:
    def run(seed: int) -> list[int]:
        s = make(kind, exponent=1.0, seed=seed)
        for k in range(20):
            s.insert(k, float(k + 1))
        return [s.sample()[0] for _ in range(200)]

    assert run(11) == run(11)
    assert run(11) != run(12)


# --------------------------------------------------------------------------
# Prioritized
# --------------------------------------------------------------------------


def check_prioritized(
    s: _core.ItemSelector, priorities: dict[int, float], exponent: float, n: int
) -> Counter:
    """Checks probability() exactly and the empirical distribution statistically."""
    expected = expected_probabilities(priorities, exponent)
    assert len(s) == len(priorities)
    for k, p in expected.items():
        assert s.probability(k) == pytest.approx(p, rel=1e-12, abs=1e-300)
    counts, reported = draw(s, n)
    for k, probabilities in reported.items():
        assert expected[k] > 0
        for r in probabilities:
            assert r == pytest.approx(expected[k], rel=1e-12)
    assert max_z(counts, expected, n) < Z_BOUND
    return counts


@pytest.mark.parametrize("exponent", [1.0, 0.5, 2.0, 0.3])
def test_prioritized_distribution(exponent: float) -> None:
    s = make("prioritized", exponent=exponent, seed=31)
    priorities = {1: 1.0, 2: 2.0, 3: 3.0, 4: 4.0, 5: 0.5}
    for k, p in priorities.items():
        s.insert(k, p)
    counts = check_prioritized(s, priorities, exponent, 30_000)
    # The same draws are clearly inconsistent with any other exponent tested here.
    for other in [1.0, 0.5, 2.0, 0.3]:
        if other != exponent:
            assert max_z(counts, expected_probabilities(priorities, other), 30_000) > Z_BOUND


def test_prioritized_exponent_one_vs_half_is_distinguishable() -> None:
    priorities = {1: 1.0, 2: 2.0, 3: 3.0, 4: 4.0}
    n = 20_000
    half = make("prioritized", exponent=0.5, seed=8)
    one = make("prioritized", exponent=1.0, seed=8)
    for k, p in priorities.items():
        half.insert(k, p)
        one.insert(k, p)
    half_counts, _ = draw(half, n)
    one_counts, _ = draw(one, n)
    p_half = expected_probabilities(priorities, 0.5)
    p_one = expected_probabilities(priorities, 1.0)
    assert p_one == pytest.approx({1: 0.1, 2: 0.2, 3: 0.3, 4: 0.4}, rel=1e-12)
    assert max_z(half_counts, p_half, n) < Z_BOUND
    assert max_z(one_counts, p_one, n) < Z_BOUND
    assert max_z(half_counts, p_one, n) > Z_BOUND
    assert max_z(one_counts, p_half, n) > Z_BOUND


def test_prioritized_reported_probability_exact() -> None:
    s = make("prioritized", exponent=0.7, seed=4)
    priorities = {k: 0.1 + k * 0.37 for k in range(50)}
    for k, p in priorities.items():
        s.insert(k, p)
    expected = expected_probabilities(priorities, 0.7)
    assert math.fsum(s.probability(k) for k in priorities) == pytest.approx(1.0, abs=1e-12)
    for _ in range(2_000):
        key, probability = s.sample()
        assert probability == pytest.approx(expected[key], rel=1e-12)
        assert probability == s.probability(key)


def test_prioritized_updates_change_probability() -> None:
    s = make("prioritized", exponent=1.0, seed=17)
    priorities = {1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0}
    for k, p in priorities.items():
        s.insert(k, p)
    check_prioritized(s, priorities, 1.0, 4_000)
    priorities[3] = 7.0
    s.update(3, 7.0)
    assert s.probability(3) == pytest.approx(0.7, rel=1e-12)
    check_prioritized(s, priorities, 1.0, 20_000)
    priorities[3] = 0.0
    s.update(3, 0.0)
    counts = check_prioritized(s, priorities, 1.0, 20_000)
    assert counts[3] == 0
    priorities[3] = 2.0
    s.update(3, 2.0)
    check_prioritized(s, priorities, 1.0, 20_000)


@pytest.mark.parametrize("removed", [[0], [7], [3], [0, 7], [2, 3, 4], [7, 6, 5, 4, 3, 2]])
def test_prioritized_after_deletes(removed: list[int]) -> None:
    exponent = 0.8
    s = make("prioritized", exponent=exponent, seed=123)
    priorities = {k: float(k + 1) for k in range(8)}
    for k, p in priorities.items():
        s.insert(k, p)
    for k in removed:
        s.delete(k)
        del priorities[k]
        assert k not in s
        with pytest.raises(KeyError):
            s.probability(k)
    counts = check_prioritized(s, priorities, exponent, 20_000)
    assert not set(counts) & set(removed)
    # Updating keys after the deletes (which moved leaves around) still hits the right key.
    for k in list(priorities):
        priorities[k] = 10.0 - priorities[k]
        s.update(k, priorities[k])
    check_prioritized(s, priorities, exponent, 20_000)


def test_prioritized_zero_priorities_never_chosen() -> None:
    s = make("prioritized", exponent=1.0, seed=9)
    priorities = {1: 0.0, 2: 3.0, 3: 0.0, 4: 1.0, 5: 0.0}
    for k, p in priorities.items():
        s.insert(k, p)
    for k in (1, 3, 5):
        assert s.probability(k) == 0.0
    counts = check_prioritized(s, priorities, 1.0, 20_000)
    assert set(counts) == {2, 4}


def test_prioritized_single_nonzero_item_is_always_chosen() -> None:
    s = make("prioritized", exponent=1.0, seed=10)
    for k in range(100):
        s.insert(k, 0.0)
    s.insert(100, 1e-300)
    for k in range(101, 200):
        s.insert(k, 0.0)
    assert {s.sample() for _ in range(1_000)} == {(100, 1.0)}


def test_prioritized_all_zero_falls_back_to_uniform() -> None:
    s = make("prioritized", exponent=1.0, seed=21)
    keys = [3, 1, 4, 15, 9]
    for k in keys:
        s.insert(k, 0.0)
    for k in keys:
        assert s.probability(k) == 1.0 / 5
    n = 20_000
    counts, reported = draw(s, n)
    assert set(counts) == set(keys)
    assert all(r == {1.0 / 5} for r in reported.values())
    assert max_z(counts, {k: 0.2 for k in keys}, n) < Z_BOUND
    # One non-zero priority ends the fallback; zeroing it again restores it.
    s.update(4, 2.0)
    assert {s.sample() for _ in range(500)} == {(4, 1.0)}
    assert s.probability(3) == 0.0
    s.update(4, 0.0)
    assert s.probability(4) == 1.0 / 5
    # Deleting the only weighted item also restores the fallback.
    s.update(9, 1.0)
    s.delete(9)
    assert s.probability(3) == 1.0 / 4
    counts, _ = draw(s, 4_000)
    assert set(counts) == {3, 1, 4, 15}


def test_prioritized_underflowing_weights_fall_back_to_uniform() -> None:
    # 1e-200 ** 2 underflows to 0: every weight is 0, so sampling is uniform.
    s = make("prioritized", exponent=2.0, seed=22)
    s.insert(1, 1e-200)
    s.insert(2, 1e-200)
    assert s.probability(1) == 0.5
    counts, reported = draw(s, 2_000)
    assert set(counts) == {1, 2}
    assert reported == {1: {0.5}, 2: {0.5}}


def test_prioritized_exponent_zero() -> None:
    s = make("prioritized", exponent=0.0, seed=33)
    priorities = {1: 0.001, 2: 1000.0, 3: 0.0, 4: 5.0}
    for k, p in priorities.items():
        s.insert(k, p)
    for k in (1, 2, 4):
        assert s.probability(k) == pytest.approx(1.0 / 3, rel=1e-12)
    assert s.probability(3) == 0.0
    counts = check_prioritized(s, priorities, 0.0, 20_000)
    assert counts[3] == 0
    assert set(counts) == {1, 2, 4}


def test_prioritized_many_items_with_random_priorities() -> None:
    rng = random.Random(5)
    exponent = 0.6
    s = make("prioritized", exponent=exponent, seed=55)
    priorities = {}
    for k in range(300):
        priorities[k] = rng.choice([0.0, rng.uniform(0, 10), rng.uniform(0, 1000)])
        s.insert(k, priorities[k])
    for k in rng.sample(range(300), 120):
        s.delete(k)
        del priorities[k]
    for k in rng.sample(sorted(priorities), 60):
        priorities[k] = rng.uniform(0, 100)
        s.update(k, priorities[k])
    expected = expected_probabilities(priorities, exponent)
    for k in priorities:
        assert s.probability(k) == pytest.approx(expected[k], rel=1e-12, abs=1e-300)
    # Too many keys for per-key counts: check the weight of groups of keys instead.
    n = 30_000
    counts, reported = draw(s, n)
    for k, r in reported.items():
        assert len(r) == 1
        assert r.pop() == pytest.approx(expected[k], rel=1e-12)
    ordered = sorted(priorities)
    groups = [ordered[i::4] for i in range(4)]
    group_counts = Counter({g: sum(counts[k] for k in keys) for g, keys in enumerate(groups)})
    group_expected = {g: math.fsum(expected[k] for k in keys) for g, keys in enumerate(groups)}
    assert max_z(group_counts, group_expected, n) < Z_BOUND
    assert all(expected[k] > 0 for k in counts)


# --------------------------------------------------------------------------
# Fifo and Lifo
# --------------------------------------------------------------------------


def test_fifo_order() -> None:
    s = make("fifo")
    keys = [5, 3, 9, 1, 7]
    for k, p in zip(keys, [1.0, 100.0, -3.0, 0.0, 50.0], strict=True):
        s.insert(k, p)
    assert s.sample() == (5, 1.0)
    assert s.sample() == (5, 1.0)  # sampling does not remove
    assert drain(s) == keys


def test_lifo_order() -> None:
    s = make("lifo")
    keys = [5, 3, 9, 1, 7]
    for k, p in zip(keys, [1.0, 100.0, -3.0, 0.0, 50.0], strict=True):
        s.insert(k, p)
    assert s.sample() == (7, 1.0)
    assert s.sample() == (7, 1.0)
    assert drain(s) == keys[::-1]


@pytest.mark.parametrize("kind", ["fifo", "lifo"])
def test_insertion_order_updates_do_not_reorder(kind: str) -> None:
    s = make(kind)
    keys = [1, 2, 3, 4]
    for k in keys:
        s.insert(k, 1.0)
    for k in (1, 4, 2, 1):
        s.update(k, 99.0)
    assert drain(s) == (keys if kind == "fifo" else keys[::-1])


@pytest.mark.parametrize("kind", ["fifo", "lifo"])
@pytest.mark.parametrize("removed", [[1], [3], [6], [1, 6], [2, 3, 4], [6, 1, 4]])
def test_insertion_order_after_deletes(kind: str, removed: list[int]) -> None:
    s = make(kind)
    keys = [1, 2, 3, 4, 5, 6]
    for k in keys:
        s.insert(k, 1.0)
    for k in removed:
        s.delete(k)
    remaining = [k for k in keys if k not in removed]
    # A re-inserted key goes to the newest end.
    s.insert(removed[0], 1.0)
    remaining.append(removed[0])
    assert drain(s) == (remaining if kind == "fifo" else remaining[::-1])


@pytest.mark.parametrize("kind", ["fifo", "lifo"])
def test_insertion_order_random_operations(kind: str) -> None:
    rng = random.Random(kind)
    s = make(kind)
    reference: list[int] = []
    next_key = 0
    for _ in range(3_000):
        op = rng.random()
        if op < 0.45 or not reference:
            s.insert(next_key, rng.uniform(-5, 5))
            reference.append(next_key)
            next_key += 1
        elif op < 0.75:
            k = rng.choice(reference)
            s.delete(k)
            reference.remove(k)
        else:
            s.update(rng.choice(reference), rng.uniform(-5, 5))
        assert len(s) == len(reference)
        if reference:
            assert s.sample() == (reference[0] if kind == "fifo" else reference[-1], 1.0)


# --------------------------------------------------------------------------
# Min and max heaps
# --------------------------------------------------------------------------


def test_min_heap_order() -> None:
    s = make("min_heap")
    priorities = {1: 5.0, 2: -1.0, 3: 3.5, 4: 0.0, 5: 100.0, 6: -7.25}
    for k, p in priorities.items():
        s.insert(k, p)
    assert s.sample() == (6, 1.0)
    assert drain(s) == sorted(priorities, key=priorities.__getitem__)


def test_max_heap_order() -> None:
    s = make("max_heap")
    priorities = {1: 5.0, 2: -1.0, 3: 3.5, 4: 0.0, 5: 100.0, 6: -7.25}
    for k, p in priorities.items():
        s.insert(k, p)
    assert s.sample() == (5, 1.0)
    assert drain(s) == sorted(priorities, key=priorities.__getitem__, reverse=True)


@pytest.mark.parametrize("kind", ["min_heap", "max_heap"])
def test_heap_ties_go_to_least_recently_inserted(kind: str) -> None:
    s = make(kind)
    keys = [40, 10, 30, 20, 50]
    for k in keys:
        s.insert(k, 2.0)
    assert s.sample() == (40, 1.0)
    assert drain(s) == keys


@pytest.mark.parametrize("kind", ["min_heap", "max_heap"])
def test_heap_update_refreshes_recency_even_with_same_priority(kind: str) -> None:
    s = make(kind)
    for k in [1, 2, 3, 4]:
        s.insert(k, 2.0)
    s.update(1, 2.0)  # same priority: 1 is now the most recently touched
    assert s.sample() == (2, 1.0)
    s.update(3, 2.0)
    s.update(2, 2.0)
    assert drain(s) == [4, 1, 3, 2]


@pytest.mark.parametrize("kind", ["min_heap", "max_heap"])
def test_heap_updates_reorder(kind: str) -> None:
    sign = 1.0 if kind == "min_heap" else -1.0
    s = make(kind)
    for k in range(1, 6):
        s.insert(k, sign * k)  # best first: 1, 2, 3, 4, 5
    assert s.sample() == (1, 1.0)
    s.update(5, sign * 0.5)  # moves to the front
    assert s.sample() == (5, 1.0)
    s.update(5, sign * 10.0)  # moves to the back
    s.update(1, sign * 3.0)  # ties with 3, but updated more recently
    assert drain(s) == [2, 3, 1, 4, 5]


@pytest.mark.parametrize("kind", ["min_heap", "max_heap"])
@pytest.mark.parametrize("removed_rank", [[0], [3], [7], [0, 7], [2, 3, 4], [7, 0, 5, 1]])
def test_heap_after_deletes(kind: str, removed_rank: list[int]) -> None:
    # Delete by position in the heap order: the best, a middle one, the worst.
    priorities = {10 + i: p for i, p in enumerate([4.0, 1.0, 7.0, 3.0, 8.0, 2.0, 6.0, 5.0])}
    reverse = kind == "max_heap"
    ordered = sorted(priorities, key=priorities.__getitem__, reverse=reverse)
    s = make(kind)
    for k, p in priorities.items():
        s.insert(k, p)
    removed = [ordered[r] for r in removed_rank]
    for k in removed:
        s.delete(k)
    assert drain(s) == [k for k in ordered if k not in removed]


@pytest.mark.parametrize("kind", ["min_heap", "max_heap"])
def test_heap_random_operations_against_reference(kind: str) -> None:
    sign = 1.0 if kind == "min_heap" else -1.0
    rng = random.Random(kind)
    s = make(kind)
    reference: dict[int, tuple[float, int]] = {}  # key -> (priority, stamp)
    next_key = 0
    for stamp in range(4_000):
        op = rng.random()
        # A few distinct priorities so that ties are common.
        priority = float(rng.randint(-3, 3))
        if op < 0.4 or not reference:
            s.insert(next_key, priority)
            reference[next_key] = (priority, stamp)
            next_key += 1
        elif op < 0.7:
            k = rng.choice(sorted(reference))
            s.delete(k)
            del reference[k]
        else:
            k = rng.choice(sorted(reference))
            s.update(k, priority)
            reference[k] = (priority, stamp)
        assert len(s) == len(reference)
        if reference:
            best = min(reference, key=lambda k: (sign * reference[k][0], reference[k][1]))
            assert s.sample() == (best, 1.0)
