"""What sampling returns: ``ReplaySample(info, data)`` with a ``SampleInfo``.

``Client.sample`` yields one ``ReplaySample`` per item (or a list of them, one
per timestep) whose info fields are Python scalars. ``Client.sample_batch``
returns one ``ReplaySample`` for a whole batch: every info field is a numpy
array of length ``batch_size`` and every data leaf is stacked on a leading
batch axis.

Example:
    >>> from resound import SampleInfo
    >>> SampleInfo.zeros()
    SampleInfo(key=0, probability=0.0, table_size=0, priority=0.0, times_sampled=0)
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from resound._frameworks import import_tensorflow

__all__ = ["ReplaySample", "SampleInfo"]


class SampleInfo(NamedTuple):
    """The state of a sampled item when it was chosen."""

    key: Any  # int, or a uint64 array in a batch
    probability: Any  # float, or float64 array
    table_size: Any  # int, or int64 array
    priority: Any  # float, or float64 array
    times_sampled: Any  # int (including this sample), or int32 array

    @classmethod
    def dtypes(cls) -> tuple[np.dtype, ...]:
        """numpy dtypes of the fields in a batch (Reverb's ``tf_dtypes``)."""
        return tuple(np.dtype(t) for t in (np.uint64, np.float64, np.int64, np.float64, np.int32))

    @classmethod
    def tf_dtypes(cls) -> SampleInfo:
        """TensorFlow dtypes of the fields, as a ``SampleInfo`` (imports TensorFlow).

        Example:
            >>> SampleInfo.tf_dtypes().key  # doctest: +SKIP
            tf.uint64
        """
        tf = import_tensorflow("SampleInfo.tf_dtypes")
        return cls(tf.uint64, tf.float64, tf.int64, tf.float64, tf.int32)

    @classmethod
    def tf_shapes(cls) -> SampleInfo:
        """A scalar ``tf.TensorShape`` for every field (imports TensorFlow)."""
        tf = import_tensorflow("SampleInfo.tf_shapes")
        return cls(*[tf.TensorShape([]) for _ in cls._fields])

    @classmethod
    def zeros(cls) -> SampleInfo:
        """Zero values for every field (Python scalars)."""
        return cls(0, 0.0, 0, 0.0, 0)


class ReplaySample(NamedTuple):
    """One sample (or one batch): ``info`` and the trajectory ``data``."""

    info: SampleInfo
    data: Any
