"""The Reverb-compatible selector and rate limiter classes (docs/semantics.md
§3.6, §4.3 and docs/compatibility.md item 13): names, reprs, the numbers each
construction computes, and validation errors that name the argument."""

from __future__ import annotations

import logging
import sys

import numpy as np
import pytest

import resound as reverb
from resound import _core, item_selectors, rate_limiters

DBL_MAX = sys.float_info.max


def test_module_aliases_and_error_classes() -> None:
    assert reverb.selectors is reverb.item_selectors
    assert issubclass(reverb.DeadlineExceededError, reverb.ReverbError)
    assert issubclass(reverb.CancelledError, reverb.ReverbError)
    assert issubclass(reverb.CancelledError, RuntimeError)
    assert reverb.errors.DeadlineExceededError is _core.DeadlineExceededError


@pytest.mark.parametrize(
    ("selector", "text", "kind", "deterministic"),
    [
        (item_selectors.Uniform(), "UniformSelector", "uniform", False),
        (
            item_selectors.Prioritized(0.8),
            "PrioritizedSelector(priority_exponent=0.8)",
            "prioritized",
            False,
        ),
        (item_selectors.Fifo(), "FifoSelector", "fifo", True),
        (item_selectors.Lifo(), "LifoSelector", "lifo", True),
        (item_selectors.MinHeap(), "HeapSelector(sign=1)", "min_heap", True),
        (item_selectors.MaxHeap(), "HeapSelector(sign=-1)", "max_heap", True),
    ],
)
def test_selector_repr_kind_and_determinism(
    selector: item_selectors.ItemSelector, text: str, kind: str, deterministic: bool
) -> None:
    assert repr(selector) == text
    assert selector.options.kind == kind
    assert selector.is_deterministic is deterministic


def test_heaps_share_one_class_and_selectors_compare_by_configuration() -> None:
    assert isinstance(item_selectors.MinHeap(), type(item_selectors.MaxHeap()))
    assert item_selectors.MinHeap().min_heap and not item_selectors.MaxHeap().min_heap
    assert item_selectors.Prioritized(0.5) == item_selectors.Prioritized(0.5)
    assert item_selectors.Prioritized(0.5) != item_selectors.Prioritized(0.6)
    assert item_selectors.MinHeap() != item_selectors.MaxHeap()
    assert item_selectors.Fifo() != item_selectors.Lifo()
    assert item_selectors.Prioritized(priority_exponent=np.float32(0.25)).priority_exponent == 0.25


@pytest.mark.parametrize("exponent", [-0.1, float("nan"), float("inf"), "1", None, True])
def test_prioritized_rejects_bad_exponents(exponent: object) -> None:
    with pytest.raises(ValueError, match="priority_exponent"):
        item_selectors.Prioritized(exponent)  # type: ignore[arg-type]


def test_a_table_built_from_the_selector_options_uses_that_selector() -> None:
    store = _core.ChunkStore()
    chunk = store.add(1, np.zeros(3, np.float32), "<f4", (), 3)
    sampler = item_selectors.Prioritized(1.0)
    table = _core.Table(
        "t",
        _core.make_selector(sampler.options.kind, sampler.options.priority_exponent, seed=3),
        _core.make_selector(item_selectors.Lifo().options.kind),
        10,
        rate_limiters.MinSize(1).internal_limiter,
        chunk_store=store,
    )
    table.insert(1, 1.0, [([(chunk.key, 0, 1)], False)])
    table.insert(2, 3.0, [([(chunk.key, 1, 1)], False)])
    assert sorted(set(table.sample(20).probabilities.tolist())) == [0.25, 0.75]


@pytest.mark.parametrize(
    ("limiter", "numbers"),
    [
        (rate_limiters.MinSize(3), (1.0, 3, -DBL_MAX, DBL_MAX)),
        (rate_limiters.SampleToInsertRatio(1.0, 10, 1.0), (1.0, 10, 9.0, 11.0)),
        (rate_limiters.SampleToInsertRatio(2.0, 5, 4.0), (2.0, 5, 6.0, 14.0)),
        (rate_limiters.SampleToInsertRatio(1.5, 1, (-3.0, 3.1)), (1.5, 1, -3.0, 3.1)),
        (rate_limiters.Queue(7), (1.0, 1, 0.0, 7.0)),
        (rate_limiters.Stack(7), (1.0, 1, 0.0, 7.0)),
        (rate_limiters.RateLimiter(1.5, 2, -1.0, 3.0), (1.5, 2, -1.0, 3.0)),
    ],
)
def test_constructions_compute_reverbs_numbers(
    limiter: rate_limiters.RateLimiter, numbers: tuple
) -> None:
    got = (
        limiter.samples_per_insert,
        limiter.min_size_to_sample,
        limiter.min_diff,
        limiter.max_diff,
    )
    assert got == numbers
    core = limiter.internal_limiter
    assert (
        core.samples_per_insert,
        core.min_size_to_sample,
        core.min_diff,
        core.max_diff,
    ) == numbers
    assert repr(limiter).startswith("RateLimiter(samples_per_insert=")


@pytest.mark.parametrize(
    ("make", "argument"),
    [
        (lambda: rate_limiters.MinSize(0), "min_size_to_sample"),
        (lambda: rate_limiters.MinSize(1.5), "min_size_to_sample"),
        (lambda: rate_limiters.Queue(0), "size"),
        (lambda: rate_limiters.Stack(-3), "size"),
        (lambda: rate_limiters.RateLimiter(0.0, 1, 0.0, 1.0), "samples_per_insert"),
        (lambda: rate_limiters.RateLimiter(1.0, 0, 0.0, 1.0), "min_size_to_sample"),
        (lambda: rate_limiters.RateLimiter(1.0, 1, 2.0, 1.0), "min_diff"),
        (lambda: rate_limiters.RateLimiter(1.0, 1, "a", 1.0), "min_diff"),
        (lambda: rate_limiters.SampleToInsertRatio(0.0, 1, 5.0), "samples_per_insert"),
        (lambda: rate_limiters.SampleToInsertRatio(-1.0, 1, 5.0), "samples_per_insert"),
        (lambda: rate_limiters.SampleToInsertRatio(2.0, 1, 1.9), "error_buffer"),
        (lambda: rate_limiters.SampleToInsertRatio(1.0, 1, (0.0, 1.5)), "error_buffer"),
        (lambda: rate_limiters.SampleToInsertRatio(1.0, 5, (6.0, 10.0)), "min_diff"),
        (lambda: rate_limiters.SampleToInsertRatio(1.0, 0, 5.0), "min_size_to_sample"),
        (lambda: rate_limiters.SampleToInsertRatio(1.0, 1, "big"), "error_buffer"),
        (lambda: rate_limiters.SampleToInsertRatio(1.0, 1, (1.0, 2.0, 3.0)), "error_buffer"),
    ],
)
def test_bad_arguments_raise_value_error_naming_them(make: object, argument: str) -> None:
    with pytest.raises(ValueError, match=argument):
        make()  # type: ignore[operator]


def test_sample_to_insert_ratio_warns_when_inserts_may_block_before_sampling(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="resound.rate_limiters"):
        rate_limiters.SampleToInsertRatio(1.0, 10, (-5.0, 5.0))
    assert any("max_diff" in record.getMessage() for record in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="resound.rate_limiters"):
        rate_limiters.SampleToInsertRatio(1.0, 10, 5.0)
    assert not caplog.records


def test_limiters_compare_by_configuration() -> None:
    assert rate_limiters.Queue(3) == rate_limiters.Stack(3)
    assert rate_limiters.Queue(3) != rate_limiters.Queue(4)
    assert rate_limiters.MinSize(2) == rate_limiters.RateLimiter(1.0, 2, -DBL_MAX, DBL_MAX)
