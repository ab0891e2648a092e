"""resound: experience replay and data transport for reinforcement learning.

The C++ core lives in :mod:`resound._core`; the Reverb-compatible API is
built on it in this package.
"""

from resound import _core

__all__ = ["_core", "__version__"]
__version__ = "0.1.0"
