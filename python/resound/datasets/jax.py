"""An iterator of sampled batches already on a JAX device, prefetched.

``DeviceIterator(client, table, batch_size)`` samples batches with
``Client.sample_batches`` and puts each one's data on the device
(``jax.device_put``) from its prefetch thread, so batch i+1 is sampled,
stacked and on its way to the device while the learner works on batch i.
On the CPU the transfer is free: batch buffers start on a 64-byte boundary,
which XLA's CPU client aliases instead of copying.

    >>> from resound.datasets.jax import DeviceIterator  # doctest: +SKIP
    >>> batches = DeviceIterator(client, 'replay', 256, drop_remainder=True)  # doctest: +SKIP
    >>> with batches:  # doctest: +SKIP
    ...     for batch in batches:
    ...         params, td = update(params, batch.data)          # jit'd: one shape
    ...         client.update_priorities('replay', (batch.info.key, np.abs(td)))

What a batch holds: ``data`` as ``jax.Array``\\ s (string leaves stay numpy:
XLA has no strings); ``info`` as numpy arrays on the host. Keys are uint64,
which JAX turns into uint32 unless ``jax_enable_x64`` is set: on the host
they stay exact for ``update_priorities``. (``jnp.asarray(batch.info.
probability)`` puts importance weights on the device when you want them.)
Data of 64-bit dtypes becomes 32-bit on the device unless ``jax_enable_x64``
(JAX's rule; it copies then).

Alignment and copies: ``jax.device_put`` and ``jax.dlpack.from_dlpack`` of a
batch leaf alias its memory on the CPU. ``jnp.asarray`` of a numpy array
always copies in current JAX (numpy arrays are mutable), whatever the
alignment. Aliased device arrays keep the batch buffer alive; writing to the
numpy array afterwards would change them, which this iterator never does.

Fixed shapes for ``jax.jit``: ``drop_remainder=True`` gives every batch
exactly ``batch_size`` samples; samples a timeout leaves short of a batch
start the next one. ``timeout`` (seconds) bounds each wait for the rate
limiter; a wait that brings nothing ends the iteration (as Reverb's datasets
end on a rate limiter timeout). What was taken and never yielded (fewer than
``batch_size`` held back, or batches prefetched when it was closed) is
``remainder()``, on the host: nothing sampled from a queue is lost.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from resound import nest
from resound._frameworks import import_jax
from resound.client import Client
from resound.errors import DeadlineExceededError
from resound.replay_sample import ReplaySample

__all__ = ["DeviceIterator"]


class DeviceIterator:
    """Batches of ``table`` with their data on a device (see the module docstring).

    Args:
      client: a ``resound.Client`` (any transport) or a server address.
      table: the table to sample.
      batch_size: samples per batch.
      device: a ``jax.Device`` to put batches on (default: JAX's default device).
      sharding: a ``jax.sharding.Sharding`` instead (e.g. a ``NamedSharding``
        splitting the batch axis over devices); not with ``device``.
      prefetch: batches kept ready on the device ahead of the one in use.
      drop_remainder: every batch exactly ``batch_size`` samples.
      timeout: seconds each wait for the rate limiter may take; a wait
        that brings nothing ends the iteration (None: wait forever).
      num_batches: batches to yield (None: until closed or a timeout).
      unpack_as_table_signature: data in the table signature's structure.

    Example:
        >>> batches = DeviceIterator(client, 'replay', 64, num_batches=2)  # doctest: +SKIP
        >>> [b.data[0].shape for b in batches]  # doctest: +SKIP
        [(64, 1, 3), (64, 1, 3)]
    """

    def __init__(
        self,
        client: Client | str,
        table: str,
        batch_size: int,
        *,
        device: Any = None,
        sharding: Any = None,
        prefetch: int = 2,
        drop_remainder: bool = False,
        timeout: float | None = None,
        num_batches: int | None = None,
        unpack_as_table_signature: bool = False,
    ) -> None:
        jax = import_jax("resound.datasets.jax.DeviceIterator")
        if isinstance(client, str):
            client = Client(client)
        if not isinstance(client, Client):
            raise ValueError(f"client must be a resound.Client or a server address, got {client!r}")
        if device is not None and sharding is not None:
            raise ValueError("give device or sharding, not both")
        if device is not None and not isinstance(device, jax.Device):
            raise ValueError(f"device must be a jax.Device, got {device!r}")
        if sharding is not None and not isinstance(sharding, jax.sharding.Sharding):
            raise ValueError(f"sharding must be a jax.sharding.Sharding, got {sharding!r}")
        self._jax = jax
        self._target = device if device is not None else sharding
        self._host = client.sample_batches(
            table,
            batch_size,
            num_batches=num_batches,
            prefetch=prefetch,
            timeout=timeout,
            drop_remainder=drop_remainder,
            unpack_as_table_signature=unpack_as_table_signature,
            transform=self._to_device,
        )

    def _to_device(self, batch: ReplaySample) -> ReplaySample:
        # On the prefetch thread: device_put starts the transfer and returns
        # (XLA dispatches asynchronously); the learner's next() finds it done.
        leaves = nest.flatten(batch.data)
        numeric = [i for i, leaf in enumerate(leaves) if leaf.dtype.kind not in "SUO"]
        placed = self._jax.device_put([leaves[i] for i in numeric], self._target)
        for index, array in zip(numeric, placed, strict=True):
            leaves[index] = array
        return ReplaySample(batch.info, nest.unflatten_as(batch.data, leaves))

    def __iter__(self) -> Iterator[ReplaySample]:
        return self

    def __next__(self) -> ReplaySample:
        try:
            return next(self._host)
        except DeadlineExceededError:
            raise StopIteration from None

    def remainder(self) -> ReplaySample | None:
        """Samples taken and never yielded, as one batch of numpy arrays on the
        host (None if there are none); stops the iterator. See
        ``BatchIterator.remainder``."""
        held = self._host.remainder()
        if held is None:
            return None
        leaves = [np.asarray(leaf) for leaf in nest.flatten(held.data)]
        return ReplaySample(held.info, nest.unflatten_as(held.data, leaves))

    def close(self) -> None:
        """Stops the prefetch thread. Idempotent."""
        self._host.close()

    def __enter__(self) -> DeviceIterator:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
