"""Rate limiters (Reverb's ``reverb.rate_limiters``): when a table lets
writers insert and learners sample.

The arithmetic is Reverb's: with ``cursor = inserts * samples_per_insert -
samples``, an insert is allowed while the table is still filling
(``size + 1 <= min_size_to_sample``) or while ``cursor`` stays ``<= max_diff``
after it; a sample needs ``size >= min_size_to_sample`` and ``cursor - 1 >=
min_diff``. Bad arguments raise ``ValueError`` naming the argument (Reverb
aborts the process for some of them).

Example:
    >>> from resound import rate_limiters
    >>> rate_limiters.SampleToInsertRatio(samples_per_insert=4.0, min_size_to_sample=1000,
    ...                                   error_buffer=400.0)
    RateLimiter(samples_per_insert=4.0, min_size_to_sample=1000, min_diff=3600.0, max_diff=4400.0)
"""

from __future__ import annotations

import logging
import numbers
import sys
import weakref

from resound import _core

__all__ = ["MinSize", "Queue", "RateLimiter", "SampleToInsertRatio", "Stack"]

_log = logging.getLogger(__name__)


def _check_integer(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def _check_int(value: object, name: str, minimum: int) -> int:
    number = _check_integer(value, name)
    if number < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return number


def _check_number(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number, got {value!r}")
    return float(value)


class RateLimiter:
    """The general limiter: samples_per_insert, min_size_to_sample, min_diff, max_diff."""

    # Set by the table the limiter is given to (one table per limiter). Not
    # typed as a Table: this module is below resound.table (no import circle).
    _resound_owner: weakref.ref[object]

    def __init__(
        self,
        samples_per_insert: float,
        min_size_to_sample: int,
        min_diff: float,
        max_diff: float,
    ) -> None:
        self._build(samples_per_insert, min_size_to_sample, min_diff, max_diff, kind="")

    def _build(
        self,
        samples_per_insert: float,
        min_size_to_sample: int,
        min_diff: float,
        max_diff: float,
        kind: str,
    ) -> None:
        # `kind` is how the user built the limiter ("Queue(10)"): timeout
        # messages and wait warnings name it so (empty: said from the numbers).
        self._limiter = _core.RateLimiter(
            _check_number(samples_per_insert, "samples_per_insert"),
            _check_int(min_size_to_sample, "min_size_to_sample", 1),
            _check_number(min_diff, "min_diff"),
            _check_number(max_diff, "max_diff"),
            kind,
        )

    @property
    def internal_limiter(self) -> _core.RateLimiter:
        """The core limiter holding this configuration (tables copy it)."""
        return self._limiter

    @property
    def samples_per_insert(self) -> float:
        return self._limiter.samples_per_insert

    @property
    def min_size_to_sample(self) -> int:
        return self._limiter.min_size_to_sample

    @property
    def min_diff(self) -> float:
        return self._limiter.min_diff

    @property
    def max_diff(self) -> float:
        return self._limiter.max_diff

    @property
    def kind(self) -> str:
        """The limiter as messages name it: how it was built.

        Example:
            >>> from resound import rate_limiters
            >>> rate_limiters.Queue(10).kind
            'Queue(10)'
        """
        return self._limiter.kind

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RateLimiter) and (
            self.samples_per_insert,
            self.min_size_to_sample,
            self.min_diff,
            self.max_diff,
        ) == (other.samples_per_insert, other.min_size_to_sample, other.min_diff, other.max_diff)

    def __hash__(self) -> int:
        return hash(
            (self.samples_per_insert, self.min_size_to_sample, self.min_diff, self.max_diff)
        )

    def __repr__(self) -> str:
        return (
            f"RateLimiter(samples_per_insert={self.samples_per_insert}, "
            f"min_size_to_sample={self.min_size_to_sample}, "
            f"min_diff={self.min_diff}, max_diff={self.max_diff})"
        )


class MinSize(RateLimiter):
    """Sampling starts once the table holds ``min_size_to_sample`` items; no
    other limit."""

    def __init__(self, min_size_to_sample: int) -> None:
        size = _check_int(min_size_to_sample, "min_size_to_sample", 1)
        self._build(1.0, size, -sys.float_info.max, sys.float_info.max, f"MinSize({size})")


class SampleToInsertRatio(RateLimiter):
    """Keeps samples per insert near ``samples_per_insert``.

    ``error_buffer`` is either a number, giving the range
    ``samples_per_insert * min_size_to_sample ± error_buffer``, or an explicit
    ``(min_diff, max_diff)`` pair. The range must be at least
    ``2 * max(1, samples_per_insert)`` wide and its lower bound must not exceed
    ``samples_per_insert * min_size_to_sample``.
    """

    def __init__(
        self,
        samples_per_insert: float,
        min_size_to_sample: int,
        error_buffer: float | tuple[float, float],
    ) -> None:
        spi = _check_number(samples_per_insert, "samples_per_insert")
        if isinstance(error_buffer, numbers.Real) and not isinstance(error_buffer, bool):
            buffer: float | tuple[float, float] = float(error_buffer)
        elif isinstance(error_buffer, (tuple, list)) and len(error_buffer) == 2:
            buffer = (
                _check_number(error_buffer[0], "error_buffer[0]"),
                _check_number(error_buffer[1], "error_buffer[1]"),
            )
        else:
            raise ValueError(
                "error_buffer must be a number or a (min_diff, max_diff) pair, "
                f"got {error_buffer!r}"
            )
        # Only the type is checked here: the core checks the values in Reverb's
        # order and names the failing argument.
        min_size = _check_integer(min_size_to_sample, "min_size_to_sample")
        core = _core.RateLimiter.sample_to_insert_ratio(spi, min_size, buffer)
        if core.max_diff < spi * min_size:
            _log.warning(
                "max_diff (%s) < samples_per_insert * min_size_to_sample (%s): inserts may block "
                "before sampling can start, which deadlocks unless inserts and samples run "
                "concurrently.",
                core.max_diff,
                spi * min_size,
            )
        self._build(
            spi,
            min_size,
            core.min_diff,
            core.max_diff,
            f"SampleToInsertRatio(samples_per_insert={samples_per_insert!r}, "
            f"min_size_to_sample={min_size_to_sample!r}, error_buffer={error_buffer!r})",
        )


class Queue(RateLimiter):
    """A bounded FIFO of ``size`` items when used with Fifo selectors and
    ``max_times_sampled=1`` (see ``Table.queue``)."""

    def __init__(self, size: int) -> None:
        number = _check_int(size, "size", 1)
        self._build(1.0, 1, 0.0, float(number), f"Queue({number})")


class Stack(RateLimiter):
    """The same limits as Queue, meant for Lifo selectors (``Table.stack``)."""

    def __init__(self, size: int) -> None:
        number = _check_int(size, "size", 1)
        self._build(1.0, 1, 0.0, float(number), f"Stack({number})")
