"""``resound.Client``: writes, samples and manages tables (Reverb's Client).

The same API works over every transport: in-process (``Server(...,
listen=False).in_process_client()``, or any address of a server in this
process) and remote over gRPC (the address of a server in another process).

Beyond Reverb: ``sample`` takes a ``timeout``; ``sample_batch`` returns a
whole batch as stacked numpy arrays; ``sample_batches`` prefetches such
batches on a background thread; ``update_priorities`` is on the client.

A client of several servers (a list of addresses, ``'ipv4:h1:p1,h2:p2'`` or
``'dns:///name:port'``) spreads writers, inserts and samples over them and
routes priority updates to the server that holds each key (see
resound._transport.server_set and docs/scale-out.md).

Example:
    >>> import numpy as np, resound
    >>> server = resound.Server([resound.Table(
    ...     'replay', resound.selectors.Uniform(), resound.selectors.Fifo(), 100,
    ...     resound.rate_limiters.MinSize(1))], listen=False)
    >>> client = server.in_process_client()
    >>> client.insert({'obs': np.ones(3, np.float32)}, priorities={'replay': 1.0})
    >>> batch = client.sample_batch('replay', batch_size=4)
    >>> batch.data[0].shape, batch.info.key.shape
    ((4, 1, 3), (4,))
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from resound import _batch_assembly, nest, specs
from resound._checks import as_updates, check_count, check_priority, check_timeout, once_read
from resound._operation_names import (
    mark,
    names_operation,
    rename_for,
    renamed_calls,
)
from resound._samples import BatchSizer, sample_generator
from resound._transport import factory
from resound._transport.closed import ClosedTransport
from resound._transport.targets import parse_target
from resound.batch_iterator import BatchFiller, BatchIterator
from resound.legacy_writer import Writer, check_writer_arguments
from resound.priority_histogram import PriorityHistogram, check_bins
from resound.replay_sample import ReplaySample
from resound.tls import ClientTls
from resound.trajectory_writer import TrajectoryWriter, _as_array, _random_source
from resound.vector_writer import VectorWriter

if TYPE_CHECKING:
    from resound._table_host import TableHost
    from resound._transport.protocol import TableMeta, Take, Transport
    from resound.structured_writer import Config, StructuredWriter
    from resound.table_info import TableInfo

__all__ = ["Client"]

_INF = float("inf")


class Client:
    """A client of one server, or of several. Constructing it contacts nothing.

    Args:
      server_address: ``'host:port'`` of the server; or several servers with
        the same tables: a list of ``'host:port'``, those joined by commas, a
        gRPC ``'ipv4:h1:p1,h2:p2'`` / ``'ipv6:...'`` target, or
        ``'dns:///name:port'`` (every address the name resolves to, followed
        as it changes).
      transport: ``'auto'`` (the default) calls a server of this process
        directly and any other over gRPC; ``'grpc'`` always uses gRPC.
      tls: None (plaintext), or a ``resound.tls.ClientTls`` for servers
        that serve TLS (every server, with several).
      failover: with several servers, a writer whose server goes away
        (unreachable or stopping) sends its unconfirmed items, with their
        chunks, to another server and carries on (True, the default); with
        False it raises ConnectionError at its next call instead, and a new
        writer goes to a server that answers. (A client of one server waits
        for its server, as while every server of several is unreachable:
        calls up to their timeout, writers until ``flush`` times out.)

    Example:
        >>> client = resound.Client(['10.0.0.1:8000', '10.0.0.2:8000'])  # doctest: +SKIP
        >>> client.server_info()['replay'].current_size  # summed over both  # doctest: +SKIP
    """

    def __init__(
        self,
        server_address: str | Sequence[str],
        *,
        transport: str = "auto",
        failover: bool = True,
        tls: ClientTls | None = None,
    ) -> None:
        self._init(server_address, transport, failover, tls, None)

    def _init(
        self,
        server_address: str | Sequence[str],
        transport: str,
        failover: bool,
        tls: ClientTls | None,
        turn: int | None,
    ) -> None:
        target = parse_target(server_address)
        if transport not in factory.KINDS:
            raise ValueError(f"transport must be 'auto', 'grpc' or 'local', got {transport!r}")
        if not isinstance(failover, bool):
            raise ValueError(f"failover must be True or False, got {failover!r}")
        if tls is not None and not isinstance(tls, ClientTls):
            raise ValueError(f"tls must be a resound.tls.ClientTls or None, got {tls!r}")
        self._tls = tls
        self._address = target.text
        self._transport_kind = transport
        self._failover = failover
        self._random = _random_source()
        self._batch_sizers: dict[str, BatchSizer] = {}
        # How every call reaches the tables (resound._transport.factory).
        self._transport: Transport = factory.transport_for(
            target, transport, failover=failover, tls=tls, turn=turn
        )

    @classmethod
    def _in_process(cls, server: TableHost) -> Client:
        client = cls.__new__(cls)
        client._transport = factory.in_process_transport(server)
        client._address = client._transport.addresses[0]
        client._transport_kind = "auto"
        client._failover = True
        client._tls = None
        client._random = _random_source()
        client._batch_sizers = {}
        return client

    def _error_addresses(self) -> list[str]:
        """The servers of this client, for messages (see _operation_names)."""
        return self._transport.addresses

    @property
    def server_address(self) -> str:
        """The address as given (several servers: joined by commas)."""
        return self._address

    @property
    def server_addresses(self) -> list[str]:
        """Each server's ``'host:port'`` (a ``dns:`` target resolved now)."""
        return self._transport.addresses

    def close(self) -> None:
        """Ends this client's calls and connections: the streams it keeps open
        between calls, and those of writers, samplers and datasets made from
        it, which raise on their next call. Later calls on the client raise
        RuntimeError. Idempotent; ``with Client(...) as client:`` closes it
        at the end of the block. A client that is dropped without ``close()``
        ends its own streams as it goes; ``close()`` says when.

        Example:
            >>> with resound.Client('localhost:8000') as client:  # doctest: +SKIP
            ...     client.insert([1.0], priorities={'replay': 1.0})
        """
        transport = self._transport
        if isinstance(transport, ClosedTransport):
            return
        self._transport = ClosedTransport(self._address)
        transport.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        # The stream behind insert() has a thread of its own, which would
        # otherwise outlive the client (writers have streams of their own).
        transport = getattr(self, "_transport", None)  # None if __init__ raised
        if transport is not None:
            with contextlib.suppress(Exception):  # the interpreter may be shutting down
                transport.close_client_stream()

    def __reduce__(self) -> tuple[Any, ...]:
        if self._address == "in-process":
            raise TypeError("an in-process client of an embedded server cannot be pickled")
        turn = self._transport.turn_for_copy()
        return (_client, (self._address, self._transport_kind, self._failover, turn, self._tls))

    def __repr__(self) -> str:
        return f"Client, server_address={self._address}"

    # --- writing

    def insert(
        self, data: Any, priorities: Mapping[str, float], *, timeout: float | None = None
    ) -> None:
        """Inserts one step of ``data`` as an item (of length 1) into each table
        of ``priorities`` ({table: priority}); blocks while a rate limiter
        refuses, at most ``timeout`` seconds per table (None: forever).

        The data is stored once and shared by every table's item.

        Example:
            >>> import numpy as np, resound
            >>> server = resound.Server([resound.Table.queue("q", 10)])
            >>> client = server.localhost_client()
            >>> client.insert({"obs": np.zeros(3, np.float32)}, priorities={"q": 1.0})
            >>> client.server_info()["q"].current_size
            1
            >>> server.stop()
        """
        # What names_operation does, without its generic (*args, **kwargs)
        # frame: one call per step in Acme-style actors, a hot path.
        try:
            self._insert(data, priorities, timeout)
        except Exception as error:
            rename_for(error, "insert", self)
            raise

    def _insert(self, data: Any, priorities: Mapping[str, float], timeout: float | None) -> None:
        if type(priorities) is not dict or not priorities:
            if not priorities:
                raise ValueError(
                    "priorities must contain at least one item (table name -> priority)"
                )
            if not isinstance(priorities, Mapping):
                raise ValueError(
                    f"priorities must be a dict {{table: priority}}, got {priorities!r}"
                )
        if timeout is not None:
            timeout = check_timeout(timeout)
        # All of one call goes to one server (with several, the servers in turn).
        transport = self._transport.one_server(priorities, timeout)
        metas = []
        checked = []
        for table, priority in priorities.items():
            meta = transport.table_info_for_writer(table, timeout)
            if type(priority) is not float or not 0.0 <= priority < _INF:
                priority = check_priority(priority, meta.prioritized, table)
            metas.append(meta)
            checked.append((table, priority))
        leaves = nest.flatten(data)
        if not leaves:
            raise ValueError("data must hold at least one value")
        for meta in metas:
            if meta.flat_signature is not None:
                _check_insert_signature(meta, leaves)
        arrays = []
        for index, leaf in enumerate(leaves):
            if leaf is None:
                raise ValueError(f"data must not hold None (value {index} of the flattened data)")
            array = _as_array(leaf)
            if not array.flags.c_contiguous:  # chunks hold contiguous bytes
                array = np.ascontiguousarray(array)
            arrays.append(array)
        draw = self._random.getrandbits
        episode = draw(64)
        chunk_keys = [draw(64) for _ in arrays]
        # The table checks each item against its signature (in the core).
        items = [(table, draw(64), priority) for table, priority in checked]
        if timeout is None and transport.insert_step(items, arrays, chunk_keys, episode):
            return
        chunks = [
            transport.add_chunk(key, array, array.dtype.str, array.shape, 1, episode_id=episode)
            for key, array in zip(chunk_keys, arrays, strict=True)
        ]
        columns = [([(key, 0, 1)], False) for key in chunk_keys]
        for table, key, priority in items:
            transport.insert(table, [(key, priority, columns)], timeout)
        del chunks  # the items hold the chunks from here on

    def trajectory_writer(
        self,
        num_keep_alive_refs: int,
        *,
        validate_items: bool = True,
        max_chunk_length: int | None = None,
        compression: str = "none",
        delta_encoded: bool = False,
    ) -> TrajectoryWriter:
        """A writer keeping the last ``num_keep_alive_refs`` steps of each column.

        Args:
          num_keep_alive_refs: how many recent steps items may reference.
          validate_items: check each item's table and signature at create_item.
          max_chunk_length: steps per chunk (default: ``min(num_keep_alive_refs,
            16)``; at most ``num_keep_alive_refs``).
          compression: ``'none'`` or ``'lz4'``.
          delta_encoded: store integer columns as row differences.
        """
        return TrajectoryWriter(
            # A writer's items and chunks go to one server (the servers in turn).
            self._transport.one_server(),
            num_keep_alive_refs,
            validate_items=validate_items,
            max_chunk_length=max_chunk_length,
            compression=compression,
            delta_encoded=delta_encoded,
        )

    def vector_writer(
        self,
        num_envs: int,
        max_sequence_length: int,
        *,
        max_chunk_length: int | None = None,
        max_in_flight_items: int | None = None,
    ) -> VectorWriter:
        """A writer for ``num_envs`` parallel environments: each ``append``
        takes a step of all of them (every field with a leading axis of
        ``num_envs``), each ``create_items`` makes an item of each one's
        newest steps (see resound.vector_writer).

        Example:
            >>> writer = client.vector_writer(num_envs=16, max_sequence_length=2)  # doctest: +SKIP
            >>> writer.append({"obs": obs, "action": action})  # doctest: +SKIP
            >>> writer.create_items("replay", priority=1.0, length=2)  # doctest: +SKIP
            >>> writer.end_episodes(done)  # doctest: +SKIP
        """
        return VectorWriter(
            # All environments' items go to one server (the servers in turn).
            self._transport.one_server(),
            num_envs,
            max_sequence_length,
            max_chunk_length=max_chunk_length,
            max_in_flight_items=max_in_flight_items,
        )

    def writer(
        self,
        max_sequence_length: int,
        delta_encoded: bool = False,
        chunk_length: int | None = None,
        max_in_flight_items: int | None = 25,
    ) -> Writer:
        """Reverb's legacy writer (see resound.legacy_writer): items of up to
        ``max_sequence_length`` recent steps, in chunks of ``chunk_length``
        steps (default ``min(10, max_sequence_length)``), with at most
        ``max_in_flight_items`` items unconfirmed (None: no bound).

        Prefer ``trajectory_writer`` in new code.

        Example:
            >>> with client.writer(2) as writer:  # doctest: +SKIP
            ...     writer.append([np.zeros(3)])
            ...     writer.create_item('my_table', num_timesteps=1, priority=1.0)
        """
        max_sequence_length, chunk_length, max_in_flight_items = check_writer_arguments(
            max_sequence_length, chunk_length, max_in_flight_items
        )
        return Writer(
            self.trajectory_writer(
                max_sequence_length,
                validate_items=False,  # the legacy writer checks items its own way
                max_chunk_length=chunk_length,
                delta_encoded=bool(delta_encoded),
            ),
            self.server_info,
            max_sequence_length,
            chunk_length,
            bool(delta_encoded),
            max_in_flight_items,
        )

    def structured_writer(self, configs: Sequence[Config]) -> StructuredWriter:
        """A writer that creates items from patterns (see resound.structured_writer)."""
        from resound import structured_writer

        if not configs:
            raise ValueError("At least one config must be provided.")
        prepared = structured_writer.prepare_configs(configs)
        writer = self.trajectory_writer(
            structured_writer.required_keep_alive_refs(prepared), validate_items=False
        )
        return structured_writer.StructuredWriter(writer, prepared)

    # --- sampling

    def sample(
        self,
        table: str,
        num_samples: int = 1,
        *,
        emit_timesteps: bool = True,
        unpack_as_table_signature: bool = False,
        timeout: float | None = None,
    ) -> Iterator[Any]:
        """Yields ``num_samples`` samples from ``table``, one at a time.

        Each is a ``ReplaySample(info, data)``; with ``emit_timesteps`` (the
        default) a list of them, one per timestep. Samples are taken from the
        table in flexible batches (as many as the rate limiter allows at once,
        up to what is still needed and to about 4 MB of data), so abandoning
        the generator early may leave taken samples unseen. ``timeout``
        bounds each wait for the rate limiter (seconds; None: forever) and
        raises DeadlineExceededError.
        """
        # What names_operation does, without its generic (*args, **kwargs)
        # frame: a learner may call this once per sample (num_samples=1).
        try:
            num_samples = check_count(num_samples, "num_samples")
            timeout = check_timeout(timeout)
            take = self._taker(table, flexible=True)
            signature = self._signature(table) if unpack_as_table_signature else None
            sizer = self._batch_sizers.get(table)
            if sizer is None:
                sizer = self._batch_sizers.setdefault(table, BatchSizer())
        except Exception as error:
            rename_for(error, "sample", self)
            raise
        return sample_generator(take, num_samples, emit_timesteps, signature, timeout, sizer, self)

    def _taker(self, table: str, flexible: bool = False) -> Take:
        """``take(count, deadline, cancelled)``: sample batches from ``table``
        (see ``Transport.taker``), from one server or several."""
        return self._transport.taker(table, flexible=flexible)

    def _signature(self, table: str) -> Any:
        return self._transport.signature(table)

    def _batch_origin(self, call: str, table: str) -> _batch_assembly.Origin:
        def fields() -> list[str] | None:
            signature = self._signature(table)
            return None if signature is None else specs.field_labels(signature)

        return _batch_assembly.Origin(call, table, fields)

    @names_operation("sample_batch")
    def sample_batch(
        self,
        table: str,
        batch_size: int,
        *,
        timeout: float | None = None,
        unpack_as_table_signature: bool = False,
    ) -> ReplaySample:
        """Samples ``batch_size`` items as one ``ReplaySample`` of stacked arrays.

        ``info`` fields are numpy arrays of length ``batch_size``; each data
        leaf is ``[batch_size, time, ...]`` (``[batch_size, ...]`` for squeezed
        columns), every array 64-byte aligned: ``torch.from_numpy``,
        ``jax.device_put`` and ``jax.dlpack.from_dlpack`` (on the CPU) share
        its memory without a copy (``jnp.asarray`` of a numpy array copies
        in current JAX). Waits for the rate limiter until the batch is full;
        ``timeout`` (seconds) bounds the whole call: DeadlineExceededError if
        no sample arrived in time, otherwise the samples taken so far (a
        smaller batch, never lost).
        Items in one batch must have equal shapes and dtypes per column (ValueError).
        """
        batch_size = check_count(batch_size, "batch_size")
        timeout = check_timeout(timeout)
        take = self._taker(table)
        signature = self._signature(table) if unpack_as_table_signature else None
        deadline = None if timeout is None else time.monotonic() + timeout
        origin = self._batch_origin("sample_batch", table)
        return _batch_assembly.batch_sample(take(batch_size, deadline, None), signature, origin)

    def sample_batches(
        self,
        table: str,
        batch_size: int,
        *,
        num_batches: int | None = None,
        prefetch: int = 2,
        timeout: float | None = None,
        drop_remainder: bool = False,
        unpack_as_table_signature: bool = False,
        transform: Callable[[ReplaySample], Any] | None = None,
    ) -> BatchIterator:
        """An iterator of ``sample_batch`` results, prefetched on a thread.

        Yields ``num_batches`` batches (None: until closed). Close it (or use
        it as a context manager) to stop the thread. Every array of a batch
        starts on a 64-byte boundary (JAX's CPU client aliases it).

        ``timeout`` (seconds; None: forever) bounds each wait for the rate
        limiter. A wait that brings no sample raises DeadlineExceededError
        (the iterator ends there). One that brings some, but not a full batch:
        without ``drop_remainder`` they are yielded as a smaller batch (so 300
        queued items sampled 128 at a time give 128, 128, 44); with
        ``drop_remainder=True`` they are kept and the next wait adds to them,
        so every batch has exactly ``batch_size`` samples (fixed shapes for
        ``jax.jit``) and no sample is thrown away: what is held when the
        iterator ends, and batches prefetched but not consumed when it is
        closed, are ``remainder()``.

        ``transform`` is applied to each batch on the prefetch thread, and
        what it returns is yielded (resound.datasets.jax puts batches on a
        device there); ``remainder()`` still gives the batches as sampled.

        Example:
            >>> with client.sample_batches('replay', 256) as batches:  # doctest: +SKIP
            ...     for batch in batches:
            ...         learn(batch.data)
        """
        batch_size = check_count(batch_size, "batch_size")
        if num_batches is not None:
            num_batches = check_count(num_batches, "num_batches")
        prefetch = check_count(prefetch, "prefetch")
        timeout = check_timeout(timeout)
        if not isinstance(drop_remainder, bool):
            raise ValueError(f"drop_remainder must be True or False, got {drop_remainder!r}")
        take = self._taker(table)
        signature = self._signature(table) if unpack_as_table_signature else None
        filler = BatchFiller(
            take,
            batch_size,
            timeout=timeout,
            drop_remainder=drop_remainder,
            signature=signature,
            origin=self._batch_origin("sample_batches", table),
        )
        return BatchIterator(
            # On the prefetch thread: its errors name sample_batches there.
            renamed_calls(filler.produce, "sample_batches", self),
            num_batches=num_batches,
            prefetch=prefetch,
            held=filler.held,
            transform=transform,
        )

    # --- managing

    @names_operation("mutate_priorities")
    def mutate_priorities(
        self,
        table: str,
        updates: Mapping[int, float] | tuple[Any, Any] | None = None,
        deletes: Iterable[int] | None = None,
    ) -> None:
        """Sets priorities and deletes keys, all or nothing: an invalid
        priority (NaN, inf, negative for Prioritized) rejects the whole call
        with ValueError. Missing keys are ignored.

        ``updates`` is a dict ``{key: priority}`` or a pair of arrays
        ``(keys, priorities)`` (numpy, or anything ``np.asarray`` takes, such
        as torch or JAX arrays) of equal length.

        Example:
            >>> batch = client.sample_batch('replay', 256)  # doctest: +SKIP
            >>> client.update_priorities('replay', (batch.info.key, td_errors))  # doctest: +SKIP

        With several servers, each key goes to the server it was sampled from
        (by this client, among its last 65,536 samples), other keys to every
        server; a server that is away is skipped.
        """
        self._transport.mutate_priorities(table, as_updates(updates), once_read(deletes))

    def update_priorities(self, table: str, updates: Mapping[int, float] | tuple[Any, Any]) -> None:
        """``mutate_priorities(table, updates=updates)``."""
        self.mutate_priorities(table, updates)

    @names_operation("reset")
    def reset(self, table: str) -> None:
        """Removes every item of ``table`` and zeroes its rate limiter
        counters (on every server; ConnectionError names any not reached)."""
        self._transport.reset(table)

    @names_operation("server_info")
    def server_info(self, timeout: float | None = None) -> dict[str, TableInfo]:
        """TableInfo of every table by name (``timeout`` in seconds). With
        several servers, each table summed over those that answer (sizes,
        counts, bytes, rate limiter calls); see ``server_infos`` for each."""
        timeout = check_timeout(timeout)
        return self._transport.server_info(timeout)

    @names_operation("server_infos")
    def server_infos(self, timeout: float | None = None) -> dict[str, dict[str, TableInfo]]:
        """``server_info`` of each server, by address (servers that do not
        answer are left out; ConnectionError if none does).

        Example:
            >>> for address, tables in client.server_infos().items():  # doctest: +SKIP
            ...     print(address, tables['replay'].current_size)
        """
        timeout = check_timeout(timeout)
        return self._transport.server_infos(timeout)

    @names_operation("priority_histogram")
    def priority_histogram(
        self, table: str, bins: int = 20, timeout: float | None = None
    ) -> PriorityHistogram:
        """How the priorities of ``table``'s items spread: their counts in
        ``bins`` (1 to 1000) equal bins between the lowest and the highest
        priority, counted by the server (only the counts travel). With
        several servers, theirs merged: the range and the total are exact,
        each item lands within one server bin of its own; see
        ``priority_histograms`` for each server's.

        Example:
            >>> import resound
            >>> server = resound.Server([resound.Table.queue('q', 10)])
            >>> client = resound.Client(f'localhost:{server.port}')
            >>> for priority in (1.0, 1.5, 4.0):
            ...     client.insert([0], priorities={'q': priority})
            >>> client.priority_histogram('q', bins=3)
            PriorityHistogram(counts=(2, 0, 1), min_priority=1.0, max_priority=4.0)
        """
        bins = check_bins(bins)
        timeout = check_timeout(timeout)
        return self._transport.priority_histogram(table, bins, timeout)

    @names_operation("priority_histograms")
    def priority_histograms(
        self, table: str, bins: int = 20, timeout: float | None = None
    ) -> dict[str, PriorityHistogram]:
        """``priority_histogram`` of each server, by address (servers that do
        not answer are left out; ConnectionError if none does)."""
        bins = check_bins(bins)
        timeout = check_timeout(timeout)
        return self._transport.priority_histograms(table, bins, timeout)

    @names_operation("checkpoint")
    def checkpoint(self) -> str | dict[str, str]:
        """Has the server write a checkpoint of all its tables (see
        resound.checkpointers); returns the checkpoint's directory (holding
        its file) on the server's machine, as Reverb does. Inserts and
        samples go on meanwhile.

        With several servers, each writes one: the directories by address
        (ConnectionError naming any server not reached).
        """
        return self._transport.checkpoint()


def _check_insert_signature(meta: TableMeta, leaves: list[Any]) -> None:
    """Raises ValueError naming the field unless ``leaves`` (one step, which
    ``insert`` stores with a time axis of length 1) match ``meta``'s
    signature, as the table's own check would (it runs too, on the server)."""
    expected = meta.flat_signature
    if expected is None:
        return
    if len(leaves) != len(expected):
        raise ValueError(
            f"table {meta.name!r}: the data has {len(leaves)} fields but the signature has "
            f"{len(expected)} ({', '.join(specs.field_labels(meta.signature))})"
        )
    for index, (leaf, spec) in enumerate(zip(leaves, expected, strict=True)):
        if leaf is None:
            continue  # refused below, naming the value
        array = _as_array(leaf)
        with_axis = (1, *array.shape)
        shape_ok = specs.shapes_compatible(spec.shape, with_axis) or specs.shapes_compatible(
            spec.shape, array.shape
        )
        if specs.dtypes_match(spec.dtype, array.dtype) and shape_ok:
            continue
        label = specs.field_labels(meta.signature)[index]
        message = specs.mismatch_text(meta.name, label, array.dtype, with_axis, spec)
        if not shape_ok:
            message += (
                f" (insert() adds a time axis of length 1: the value given is "
                f"{specs.shape_text(array.shape)}, and the signature may have that axis or not)"
            )
        raise ValueError(message)


# Client.insert and Client.sample are their own names_operation frames (see there).
mark(Client.insert.__code__, "insert")
mark(Client.sample.__code__, "sample")


def _client(
    address: str,
    transport: str,
    failover: bool = True,
    turn: int | None = None,
    tls: ClientTls | None = None,
) -> Client:
    # Unpickling: keyword arguments cannot travel in __reduce__'s args.
    client = Client.__new__(Client)
    client._init(address, transport, failover, tls, turn)
    return client
