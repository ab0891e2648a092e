"""resound: experience replay and data transport for reinforcement learning.

Reverb's Python API without TensorFlow (``import resound as reverb``), on a
C++ core (:mod:`resound._core`), with numpy in and out.

Example:
    >>> import resound as reverb
    >>> server = reverb.Server(tables=[
    ...     reverb.Table(
    ...         name='my_table',
    ...         sampler=reverb.selectors.Uniform(),
    ...         remover=reverb.selectors.Fifo(),
    ...         max_size=100,
    ...         rate_limiter=reverb.rate_limiters.MinSize(1)),
    ... ])
    >>> client = reverb.Client(f'localhost:{server.port}')
    >>> client.insert([0, 1], priorities={'my_table': 1.0})
    >>> client.server_info()['my_table'].current_size
    1
"""

from typing import Any

from resound import (
    _core,
    checkpointers,
    errors,
    item_selectors,
    nest,
    pybind,
    rate_limiters,
    specs,
    tls,
    wait_warnings,
)
from resound.batch_iterator import BatchIterator
from resound.client import Client
from resound.errors import (
    CancelledError,
    DeadlineExceededError,
    NotFoundError,
    ResourceExhaustedError,
    ReverbError,
)
from resound.legacy_writer import Writer
from resound.replay_sample import ReplaySample, SampleInfo
from resound.server import Server
from resound.specs import TensorSpec
from resound.table import Table
from resound.table_info import TableInfo
from resound.tls import ClientTls, ServerTls
from resound.trajectory_writer import CellRef, TrajectoryColumn, TrajectoryWriter
from resound.vector_writer import VectorWriter
from resound.wait_warnings import set_wait_warning, wait_warning_seconds

# Reverb exposes the selectors module under both names.
selectors = item_selectors

__all__ = [
    "BatchIterator",
    "CancelledError",
    "CellRef",
    "Client",
    "ClientTls",
    "DeadlineExceededError",
    "NotFoundError",
    "ReplaySample",
    "ResourceExhaustedError",
    "ReverbError",
    "SampleInfo",
    "Server",
    "ServerTls",
    "Table",
    "TableInfo",
    "TensorSpec",
    "TrajectoryColumn",
    "TrajectoryWriter",
    "VectorWriter",
    "Writer",
    "__version__",
    "_core",
    "checkpointers",
    "errors",
    "item_selectors",
    "nest",
    "pybind",
    "rate_limiters",
    "selectors",
    "set_wait_warning",
    "specs",
    "structured",
    "structured_writer",
    "tls",
    "wait_warning_seconds",
    "wait_warnings",
]
__version__ = "0.1.0"


# Reverb's TensorFlow names, from modules that import TensorFlow only when used.
_LAZY_NAMES = {
    "TrajectoryDataset": "resound.datasets.tf",
    "TimestepDataset": "resound.datasets.tf",
    "TFClient": "resound.datasets.tf_client",
    "PatternDataset": "resound.datasets.tf_patterns",
}


def __getattr__(name: str) -> Any:
    import importlib

    # The structured writer module is imported on first use (Reverb also
    # calls it `structured`).
    if name in ("structured_writer", "structured"):
        module = importlib.import_module("resound.structured_writer")
        globals()["structured_writer"] = globals()["structured"] = module
        return module
    if name in _LAZY_NAMES:
        value = getattr(importlib.import_module(_LAZY_NAMES[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'resound' has no attribute {name!r}")
