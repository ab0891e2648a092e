"""A PyTorch ``IterableDataset`` of sampled batches (resound's batched path).

``BatchDataset(client, table, batch_size)`` yields one ``ReplaySample`` of
stacked tensors per batch, from ``Client.sample_batches`` (sampled and
stacked in C++, prefetched on a thread). Use it in a ``DataLoader`` with
``batch_size=None`` (the dataset batches already), with or without worker
processes:

    >>> from torch.utils.data import DataLoader  # doctest: +SKIP
    >>> from resound.datasets.torch import BatchDataset  # doctest: +SKIP
    >>> dataset = BatchDataset('localhost:8000', 'replay', 256, drop_last=True)  # doctest: +SKIP
    >>> for batch in DataLoader(dataset, batch_size=None, num_workers=2):  # doctest: +SKIP
    ...     loss = learn(batch.data)                        # tensors [256, T, ...]
    ...     client.update_priorities('replay', (batch.info.key, new_priorities))

What a batch holds:

* Data leaves are ``torch.from_numpy`` of the batch arrays: no copy; the
  tensor owns the (64-byte aligned) buffer. String columns stay numpy arrays
  (torch has no string tensors).
* ``info.key`` is a ``torch.uint64`` tensor. torch's uint64 support is
  limited (no arithmetic on CPU before torch 2.3, none on some devices), but
  keys need none: they go back to ``Client.update_priorities(table, (keys,
  priorities))`` as they are (``np.asarray`` of the tensor is exact; an int64
  view would turn keys of 2**63 and more negative). Keep keys on the CPU; the
  other info fields are float64 / int64 / int32 tensors.

Worker processes: each worker samples its own batches through its own gRPC
client to the same server(s), made in the worker from the client's address
(a gRPC channel does not survive ``fork``). The server must be reachable
over gRPC: a resound-server, or a ``Server`` of the main process that
listens. An in-process client of an embedded server (``Server(...,
listen=False).in_process_client()``) works with ``num_workers=0`` only
(sending the dataset to a worker raises TypeError saying so). Workers must
be started by 'forkserver' or 'spawn' (``data_loader`` does): gRPC does not
survive ``fork()`` in a process that has used it, so a forked worker raises
RuntimeError instead of crashing. ``num_batches`` is the total over all
workers.

Timeouts: ``timeout`` bounds each wait for the rate limiter; when a wait
brings no sample the iteration ends (as Reverb's datasets end on a rate
limiter timeout). With ``drop_last=True`` every batch has exactly
``batch_size`` samples: samples a timeout leaves short of a batch start the
next one; only those still held when the iteration ends (fewer than
``batch_size``) are dropped, with a warning on the ``resound`` logger naming
how many (``drop_last=False`` yields them as a last, smaller batch instead).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from resound import nest
from resound._checks import check_count, check_timeout
from resound._frameworks import import_torch
from resound.client import Client
from resound.errors import DeadlineExceededError
from resound.replay_sample import ReplaySample, SampleInfo

if TYPE_CHECKING:
    from torch.utils.data import IterableDataset

    class BatchDataset(IterableDataset[ReplaySample]):
        """See the module docstring."""

        def __init__(
            self,
            client: Client | str,
            table: str,
            batch_size: int,
            *,
            num_batches: int | None = None,
            drop_last: bool = False,
            timeout: float | None = None,
            pin_memory: bool = False,
            prefetch: int = 2,
            unpack_as_table_signature: bool = False,
        ) -> None: ...

        def __iter__(self) -> Iterator[ReplaySample]: ...


__all__ = ["BatchDataset", "data_loader", "to_tensors"]

_log = logging.getLogger("resound")


def to_tensors(batch: ReplaySample, pin_memory: bool = False) -> ReplaySample:
    """``batch`` (from ``Client.sample_batch``) with every numeric array as a
    torch tensor sharing its memory (pinned copies with ``pin_memory``);
    string arrays stay numpy.

    Example:
        >>> tensors = to_tensors(client.sample_batch('replay', 32))  # doctest: +SKIP
        >>> tensors.data[0].dtype  # doctest: +SKIP
        torch.float32
    """
    torch = import_torch()

    def convert(array: Any) -> Any:
        if not isinstance(array, np.ndarray) or array.dtype.kind in "SUO":
            return array
        tensor = torch.from_numpy(array)
        return tensor.pin_memory() if pin_memory else tensor

    info = SampleInfo(*(convert(field) for field in batch.info))
    return ReplaySample(info, nest.map_structure(convert, batch.data))


def data_loader(
    client: Client | str,
    table: str,
    batch_size: int,
    *,
    num_workers: int = 0,
    pin_memory: bool = False,
    multiprocessing_context: str = "forkserver",
    **dataset_options: Any,
) -> Any:
    """A ``torch.utils.data.DataLoader`` of ``BatchDataset(client, table,
    batch_size, **dataset_options)``: ``batch_size=None`` (the dataset
    batches), ``num_workers`` worker processes started by
    ``multiprocessing_context`` ('forkserver' or 'spawn': not 'fork', which
    gRPC does not survive), and the DataLoader's own ``pin_memory`` (it pins
    in the main process, also with workers; without an accelerator torch
    warns and does not pin).

    Example:
        >>> loader = data_loader('localhost:8000', 'replay', 256, num_workers=2,  # doctest: +SKIP
        ...                      drop_last=True, num_batches=1000)
        >>> for batch in loader:  # doctest: +SKIP
        ...     learn(batch.data)
    """
    torch = import_torch("resound.datasets.torch.data_loader")
    num_workers = int(num_workers)
    if num_workers < 0:
        raise ValueError(f"num_workers must be >= 0, got {num_workers}")
    if multiprocessing_context not in ("forkserver", "spawn"):
        raise ValueError(
            "multiprocessing_context must be 'forkserver' or 'spawn' (gRPC does not survive "
            f"fork), got {multiprocessing_context!r}"
        )
    dataset = __getattr__("BatchDataset")(client, table, batch_size, **dataset_options)
    return torch.utils.data.DataLoader(
        dataset,
        batch_size=None,
        num_workers=num_workers,
        pin_memory=pin_memory,
        multiprocessing_context=multiprocessing_context if num_workers else None,
    )


def _worker_client(client: Client | str) -> Client:
    """A new gRPC client to the same server(s), for a worker process."""
    if isinstance(client, str):
        return Client(client, transport="grpc")
    # The same address, failover and TLS settings (what pickling a Client
    # keeps), always over gRPC: the server is in another process.
    return Client(
        client.server_address, transport="grpc", failover=client._failover, tls=client._tls
    )


def _share(total: int | None, worker: int, num_workers: int) -> int | None:
    """This worker's part of ``total`` batches (None: unbounded)."""
    if total is None:
        return None
    return total // num_workers + (1 if worker < total % num_workers else 0)


def _define() -> type:
    torch = import_torch("resound.datasets.torch.BatchDataset")

    # torch is a module bound at run time (import_torch), not a name mypy can resolve.
    class BatchDataset(torch.utils.data.IterableDataset):  # type: ignore[name-defined]
        """Batches of ``table`` as ``ReplaySample``\\ s of tensors (see the
        module docstring): ``client`` is a ``resound.Client`` or a server
        address; ``drop_last`` gives every batch exactly ``batch_size``
        samples; ``timeout`` (seconds) ends the iteration when a wait for the
        rate limiter brings nothing; ``pin_memory`` pins each batch (needs
        an accelerator; with worker processes prefer ``DataLoader(...,
        pin_memory=True)``, which pins in the main process)."""

        def __init__(
            self,
            client: Client | str,
            table: str,
            batch_size: int,
            *,
            num_batches: int | None = None,
            drop_last: bool = False,
            timeout: float | None = None,
            pin_memory: bool = False,
            prefetch: int = 2,
            unpack_as_table_signature: bool = False,
        ) -> None:
            super().__init__()
            if not isinstance(client, (Client, str)):
                raise ValueError(
                    f"client must be a resound.Client or a server address, got {client!r}"
                )
            if not isinstance(table, str) or not table:
                raise ValueError(f"table must be a table name, got {table!r}")
            for name, flag in (
                ("drop_last", drop_last),
                ("pin_memory", pin_memory),
                ("unpack_as_table_signature", unpack_as_table_signature),
            ):
                if not isinstance(flag, bool):
                    raise ValueError(f"{name} must be True or False, got {flag!r}")
            if pin_memory and not _accelerator_available(torch):
                raise ValueError(
                    "pin_memory=True needs an accelerator (CUDA or another torch.accelerator), "
                    "and torch finds none; use pin_memory=False"
                )
            self.client = client
            self.table = table
            self.batch_size = check_count(batch_size, "batch_size")
            self.num_batches = (
                None if num_batches is None else check_count(num_batches, "num_batches")
            )
            self.drop_last = drop_last
            self.timeout = check_timeout(timeout)
            self.pin_memory = pin_memory
            self.prefetch = check_count(prefetch, "prefetch")
            self.unpack_as_table_signature = unpack_as_table_signature

        def __getstate__(self) -> dict[str, Any]:
            # Pickled for spawned workers: say which setting is the problem.
            client = self.client
            if isinstance(client, Client) and client.server_address == "in-process":
                raise TypeError(
                    "BatchDataset with an in-process client of an embedded server cannot be "
                    "sent to worker processes; use num_workers=0, or a server that listens"
                )
            state = dict(self.__dict__)
            state["_unpickled"] = True
            return state

        def __iter__(self) -> Iterator[ReplaySample]:
            info = torch.utils.data.get_worker_info()
            if info is None:
                client = Client(self.client) if isinstance(self.client, str) else self.client
                num_batches = self.num_batches
            else:
                if not self.__dict__.get("_unpickled", False):
                    raise RuntimeError(_FORKED_WORKER)
                client = _worker_client(self.client)
                num_batches = _share(self.num_batches, info.id, info.num_workers)
            if num_batches == 0:
                return
            batches = client.sample_batches(
                self.table,
                self.batch_size,
                num_batches=num_batches,
                prefetch=self.prefetch,
                timeout=self.timeout,
                drop_remainder=self.drop_last,
                unpack_as_table_signature=self.unpack_as_table_signature,
            )
            try:
                while True:
                    try:
                        batch = next(batches)
                    except StopIteration:
                        return
                    except DeadlineExceededError:
                        self._report_dropped(batches.remainder())
                        return
                    yield to_tensors(batch, self.pin_memory)
            finally:
                batches.close()

        def _report_dropped(self, remainder: ReplaySample | None) -> None:
            if remainder is not None:
                _log.warning(
                    "BatchDataset of table %r: the rate limiter timeout (%s s) ended the "
                    "iteration with %d samples short of a batch of %d; drop_last=True dropped "
                    "them",
                    self.table,
                    self.timeout,
                    len(remainder.info.key),
                    self.batch_size,
                )

    BatchDataset.__module__ = __name__
    BatchDataset.__qualname__ = "BatchDataset"
    return BatchDataset


_FORKED_WORKER = (
    "resound.datasets.torch.BatchDataset in a forked DataLoader worker: gRPC does not survive "
    "fork() in a process that has used it (the worker would crash); give the DataLoader "
    "multiprocessing_context='forkserver' (or 'spawn'), or use resound.datasets.torch."
    "data_loader(...), which does"
)


def _accelerator_available(torch: Any) -> bool:
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None:
        return bool(accelerator.is_available())
    return bool(torch.cuda.is_available())


def __getattr__(name: str) -> Any:
    # BatchDataset subclasses torch's IterableDataset (DataLoader checks), so
    # it is defined, importing torch, when it is first asked for.
    if name == "BatchDataset":
        cls = _define()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
