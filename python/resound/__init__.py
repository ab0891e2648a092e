"""resound: experience replay and data transport for reinforcement learning.

The C++ core lives in :mod:`resound._core`; the Reverb-compatible API is
built on it in this package (``import resound as reverb``).

Example:
    >>> import resound as reverb
    >>> reverb.selectors.Prioritized(0.6)
    PrioritizedSelector(priority_exponent=0.6)
    >>> reverb.rate_limiters.Queue(10)
    RateLimiter(samples_per_insert=1.0, min_size_to_sample=1, min_diff=0.0, max_diff=10.0)
"""

from resound import _core, errors, item_selectors, rate_limiters
from resound.errors import CancelledError, DeadlineExceededError, ReverbError

# Reverb exposes the selectors module under both names.
selectors = item_selectors

__all__ = [
    "CancelledError",
    "DeadlineExceededError",
    "ReverbError",
    "__version__",
    "_core",
    "errors",
    "item_selectors",
    "rate_limiters",
    "selectors",
]
__version__ = "0.1.0"
