"""The servers behind a Client of several (scale-out): ``ServerSet``, the
Transport (resound._transport.protocol) over one transport per server.

Each server is an independent resound server with the same tables; the
client spreads its work over them:

* a trajectory writer, and each ``Client.insert``, goes to one server, in
  turn, so an item and its chunks always land together;
* a sample request is split over the servers and runs on all of them at once
  (``take``). Servers whose rate limiter has nothing to give are asked
  without waiting, and their share goes to the others;
* priority updates and deletes go to the server each key was sampled from
  (the set remembers the last _REMEMBERED_KEYS sampled keys); keys it does
  not know go to every server, which ignore keys they do not hold;
* ``server_info`` sums every table over the servers, ``priority_histogram``
  merges theirs, ``reset`` and ``checkpoint`` reach all of them.

A server that stops answering is left out for a back-off (0.5 s, doubling up
to 2 s) and then tried again, so a restarted server rejoins on its own. With
``failover``, a writer whose server went away sends its unconfirmed items
(chunks included) to another server and carries on there. While *every*
server is unreachable, calls wait for one to come up, as a client of one
server waits for it (resound._transport.waiting): up to their timeout, then
DeadlineExceededError (``checkpoint`` raises ConnectionError at once, as
Reverb's does).

Example:
    >>> import resound
    >>> servers = [resound.Server([resound.Table.queue('q', 10)]) for _ in range(2)]
    >>> client = resound.Client([f'localhost:{s.port}' for s in servers])
    >>> for step in range(4):
    ...     client.insert([step], priorities={'q': 1.0})
    >>> [s.table('q').info.current_size for s in servers]
    [2, 2]
    >>> client.server_info()['q'].current_size
    4
"""

from __future__ import annotations

import functools
import itertools
import math
import random
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from resound import _core
from resound._transport.members import Member, log_failover
from resound._transport.remote import RemoteTransport
from resound._transport.targets import Target, resolve_name
from resound._transport.waiting import Outage, deadline_after, remaining
from resound._transport.worker_pool import WorkerPool
from resound.errors import CancelledError, DeadlineExceededError
from resound.priority_histogram import PriorityHistogram, merged
from resound.table_info import TableInfo, combined
from resound.wait_warnings import SAMPLER_LOGGER, BlockedWait

if TYPE_CHECKING:
    from resound._transport.factory import AddressTransport
    from resound._transport.protocol import ServerTransport, TableMeta, Take
    from resound._transport.sample_stream import SampleStream

__all__ = ["Member", "ServerSet"]

# A dns: target is resolved again this often, and sooner after a failure.
_RESOLVE_EVERY_SECONDS = 30.0
_RESOLVE_AFTER_FAILURE_SECONDS = 1.0
# How many sampled keys the set remembers the server of.
_REMEMBERED_KEYS = 1 << 16
# Waits for a rate limiter go in slices this long, so that a share waiting on
# one server can move to another and a closed iterator stops soon.
_WAIT_SLICE_SECONDS = 0.1
# Sample requests ask for at least this many samples where a batch allows.
_MIN_SHARE = 128
# A server that had nothing to sample is asked again this often (without
# waiting) while others serve.
_STARVED_RECHECK_SECONDS = 0.05
# Errors that mean "this server is not there (now)".
_GONE = (ConnectionError, CancelledError)


def _reraise(error: BaseException) -> Any:
    raise error


def _outcome(call: Callable[[], Any]) -> Any:
    """What ``call()`` returns, or the exception it raises."""
    try:
        return call()
    except BaseException as error:  # noqa: BLE001 - handed to the caller
        return error


def _reasons_text(reasons: dict[str, str]) -> str:
    """Each server's reason, by address: "a:1: why | b:2: why"."""
    return " | ".join(f"{address}: {reason}" for address, reason in reasons.items())


def _call_weakly(method: weakref.WeakMethod, *args: Any) -> Any:
    """``method(*args)`` while its object lives; None after."""
    bound = method()
    return None if bound is None else bound(*args)


class ServerSet:
    """Spreads a Client's calls over the servers of ``target``; each
    server's transport is ``member_transport(address)``."""

    def __init__(
        self,
        target: Target,
        member_transport: Callable[[str], AddressTransport],
        failover: bool,
    ) -> None:
        self._target = target
        self._member_transport = member_transport
        self._failover = failover
        self._lock = threading.Lock()
        self._members: list[Member] = []
        self._resolved_at = -math.inf
        self._resolve_soon = False
        if target.addresses is not None:
            self._members = [Member(a, member_transport(a)) for a in target.addresses]
        # Turns start at random: clients in many processes (each unpickling
        # its own copy) then spread their writers instead of all starting
        # with the first server.
        self._turn = itertools.count(random.randrange(1 << 16))  # shares, replacements
        self._writer_turn = itertools.count(random.randrange(1 << 16))  # writers, inserts
        self._pool = WorkerPool("client")
        self._owners: dict[int, Member] = {}
        self._remembered: deque[list[int]] = deque()
        self._num_remembered = 0

    # --- the members and their health

    def members(self) -> list[Member]:
        """Every server (a dns: target is resolved when due)."""
        dns_name = self._target.dns_name
        if dns_name is not None:
            since = time.monotonic() - self._resolved_at
            if since >= _RESOLVE_EVERY_SECONDS or (
                self._resolve_soon and since >= _RESOLVE_AFTER_FAILURE_SECONDS
            ):
                self._resolve(*dns_name)
        with self._lock:
            return list(self._members)

    def members_known(self) -> list[Member]:
        """Every server found so far, without resolving a dns: target again."""
        with self._lock:
            return list(self._members)

    def live(self) -> list[Member]:
        """The servers not left out after a failure."""
        now = time.monotonic()
        return [m for m in self.members() if m.down_until <= now]

    @property
    def addresses(self) -> list[str]:
        return [m.address for m in self.members()]

    def mark_down(self, member: Member, error: BaseException | None = None) -> None:
        """``member`` failed a call (``error``): left out for a back-off,
        and said so once when it goes down (see members.py)."""
        with self._lock:
            went_down = member.mark_down()
            self._resolve_soon = True
        if went_down:
            member.log_down(error, [m.address for m in self.live() if m is not member])

    def mark_up(self, member: Member) -> None:
        """``member`` answered: back in the set (said so if it was down)."""
        if member.failures:
            with self._lock:
                came_back = member.mark_up()
            if came_back is not None:
                member.log_up(came_back)

    def _resolve(self, host: str, port: int) -> None:
        self._resolved_at = time.monotonic()
        self._resolve_soon = False
        try:
            addresses = resolve_name(host, port)
        except OSError as error:
            with self._lock:
                if self._members:
                    return  # keep the servers found before
            raise ConnectionError(
                f"server_address {self._target.text!r}: {host!r} does not resolve: {error}"
            ) from None
        with self._lock:
            known = {m.address: m for m in self._members}
            self._members = [
                known.get(a) or Member(a, self._member_transport(a)) for a in addresses
            ]

    def transport(self, member: Member) -> ServerTransport:
        """The member's transport, with writer failover when configured."""
        transport = member.connection.chosen()
        if isinstance(transport, RemoteTransport) and transport.failover is None:
            # A member that is not there fails at once, and is left out; the
            # set waits only while every member is unreachable.
            transport.wait_for_server = False
            # Weakly: the streams' threads must not keep the set (and with it
            # the clients whose finalizers end those streams) alive.
            method = self._replacement if self._failover else self._no_replacement
            transport.failover = functools.partial(_call_weakly, weakref.WeakMethod(method))
        return transport

    def next_member(self) -> Member:
        """The server for a new writer or insert: the live ones in turn."""
        candidates = self.live() or self.members()
        return candidates[next(self._writer_turn) % len(candidates)]

    def turn_for_copy(self) -> int:
        """Where a pickled copy of the client starts its turns: each copy the
        next (a driver pickling the client for each of its actor tasks
        spreads their writers over the servers in turn)."""
        return next(self._writer_turn)

    def start_turns_at(self, turn: int) -> None:
        self._writer_turn = itertools.count(turn)

    def one_server(
        self, tables: Iterable[str] = (), timeout: float | None = None
    ) -> ServerTransport:
        """The transport of the next server in turn, for a new writer
        (``tables`` empty: the next live one) or an insert call (the next
        that answers with the options of ``tables``; see ``member_for``)."""
        tables = list(tables)
        if not tables:
            return self.transport(self.next_member())
        return self.transport(self.member_for(tables, timeout))

    def member_for(self, tables: Iterable[str], timeout: float | None = None) -> Member:
        """The next server (in turn) that answers with the options of
        ``tables``; while none answers, waits for one up to ``timeout``
        (DeadlineExceededError)."""
        deadline = deadline_after(timeout)
        outage = None
        while True:
            error: BaseException | None = None
            for _ in range(len(self.members())):
                member = self.next_member()
                transport = self.transport(member)
                try:
                    for table in tables:
                        transport.table_info_for_writer(table)
                except _GONE as gone:
                    self.mark_down(member, gone)
                    error = gone
                    continue
                return member
            outage = self._wait_for_a_member(outage, error, deadline, "Insert", timeout)

    def _replacement(self, failed: RemoteTransport) -> RemoteTransport | None:
        """Another server's transport for an insert stream whose server went
        away (None if no other is live); marks the failed server down."""
        others = []
        for member in self.members():
            if member.connection.current is failed:
                self.mark_down(member)
            else:
                others.append(member)
        now = time.monotonic()
        live = [m for m in others if m.down_until <= now]
        start = next(self._turn)
        for index in range(len(live)):
            transport = self.transport(live[(start + index) % len(live)])
            if isinstance(transport, RemoteTransport):
                log_failover(failed.address, transport.address)
                return transport
        log_failover(failed.address, None)
        return None

    def _no_replacement(self, failed: RemoteTransport) -> RemoteTransport | None:
        """Without failover: a writer whose server went away raises at once
        (the others' writers carry on; new writers go to live servers)."""
        for member in self.members():
            if member.connection.current is failed:
                self.mark_down(member)
        raise ConnectionError(
            f"Insert: the server at {failed.address} went away (the client has failover=False)"
        )

    # --- calls on several servers at once

    def call_each(
        self, members: Sequence[Member], call: Callable[[Member], Any]
    ) -> list[tuple[Member, Any]]:
        """``call(member)`` for every member, side by side; each result, or the
        exception it raised, with its member, in the members' order. Servers
        that are not there are marked down."""
        # The calling thread takes the last one.
        finishes = [self._pool.start(functools.partial(call, m)) for m in members[:-1]]
        finishes += [functools.partial(call, m) for m in members[-1:]]
        outcomes = [_outcome(finish) for finish in finishes]
        for member, outcome in zip(members, outcomes, strict=True):
            if isinstance(outcome, _GONE):
                self.mark_down(member, outcome)
            elif not isinstance(outcome, BaseException):
                self.mark_up(member)
        return list(zip(members, outcomes, strict=True))

    def any_transport(self, call: Callable[[Any], Any]) -> Any:
        """``call(transport)`` on the first server that answers (table
        signatures and options, which every server shares); while none
        answers, waits for one."""
        outage = None
        while True:
            now = time.monotonic()
            members = self.live() + [m for m in self.members() if m.down_until > now]
            error: BaseException | None = None
            for member in members:
                try:
                    return call(self.transport(member))
                except _GONE as gone:
                    self.mark_down(member, gone)
                    error = gone
            outage = self._wait_for_a_member(outage, error, None, "ServerInfo", None)

    def _wait_for_a_member(
        self,
        outage: Outage | None,
        error: BaseException | None,
        deadline: float | None,
        what: str,
        timeout: float | None,
        cancelled: threading.Event | None = None,
    ) -> Outage:
        """Every server is unreachable: waits until one's back-off ends (or
        the next warning is due, or ``cancelled`` is set), then returns the
        outage (``outage``, or a new one) for the caller to try again.
        DeadlineExceededError once ``deadline`` has passed."""
        if outage is None:
            outage = Outage(f"{self._target.text!r} (every server)")
        outage.note(error if error is not None else "every server is left out after failures")
        outage.warn_if_due(what)
        left = remaining(deadline)
        if left == 0.0:
            raise outage.deadline_error(what, timeout)
        now = time.monotonic()
        soonest = min((m.down_until for m in self.members()), default=now) - now
        wait = max(_WAIT_SLICE_SECONDS, min(soonest, outage.until_warning()))
        if left is not None:
            wait = min(wait, left)
        if cancelled is not None:
            cancelled.wait(wait)
        else:
            time.sleep(wait)
        return outage

    # --- sampling

    def taker(self, table: str, *, flexible: bool = False) -> Take:
        return functools.partial(self.take, table, flexible=flexible)

    def open_sample_stream(self, table: str) -> SampleStream | None:
        del table  # requests spread over the servers: see take
        return None

    def signature(self, table: str) -> Any:
        return self.any_transport(lambda transport: transport.signature(table))

    def table_info_for_writer(self, name: str, timeout: float | None = None) -> TableMeta:
        """The options of table ``name`` (every server has the same), from
        the first that answers; waits for one while none does."""
        del timeout  # waits for a server as long as it takes (any_transport)
        return self.any_transport(lambda transport: transport.table_info_for_writer(name))

    def take(
        self,
        table: str,
        count: int,
        deadline: float | None,
        cancelled: threading.Event | None,
        *,
        flexible: bool = False,
    ) -> list[Any]:
        """Sample batches from the servers holding ``count`` samples in all
        (fewer once the deadline passes after the first sample, or once
        ``cancelled`` is set; ``flexible``: whatever the first answers with
        samples bring); DeadlineExceededError if none came in time.

        Requests never ask for more than is still missing, so no sample is
        taken and then dropped: a share waiting on one server moves to the
        others only when that wait's slice ends. Requests to remote servers
        all start at once and their answers are read in the order asked (no
        thread hand-offs: the decoding needs this thread's GIL anyway).
        """
        pending: deque[tuple[Member, Callable[[], Any]]] = deque()
        outstanding: dict[Member, int] = {}
        parts: list[tuple[Member, Any]] = []
        taken = 0
        failure: BaseException | None = None
        last_gone: BaseException | None = None
        outage: Outage | None = None
        what = f"Sample from table {table!r}"
        first_round = True
        # Why each server's last request for this call timed out, for the
        # wait warning and the final DeadlineExceededError.
        reasons: dict[str, str] = {}
        started = time.monotonic()
        blocked: BlockedWait | None = None
        while True:
            now = time.monotonic()
            asking = (
                failure is None
                and taken < count
                and not (flexible and taken)
                and not (cancelled is not None and cancelled.is_set())
                and not (deadline is not None and now >= deadline)
            )
            if asking:
                missing = count - taken - sum(outstanding.values())
                if missing > 0:
                    requests = self._plan(table, missing, outstanding, first_round)
                    first_round = False
                    for member, size, waits in requests:
                        wait = 0.0
                        if waits:
                            wait = _WAIT_SLICE_SECONDS
                            if deadline is not None:
                                wait = min(wait, max(0.0, deadline - now))
                        outstanding[member] = size
                        alone = len(requests) == 1 and len(outstanding) == 1
                        pending.append(
                            (member, self._start_sample(member, table, size, wait, alone))
                        )
                if not outstanding:
                    # Every server is unreachable: wait for one.
                    outage = self._wait_for_a_member(
                        outage, last_gone, deadline, what, None, cancelled
                    )
                    first_round = True
                    continue
            if not outstanding:
                break
            member, finish = pending.popleft()
            outcome = _outcome(finish)
            del outstanding[member]
            if isinstance(outcome, DeadlineExceededError):
                member.starved[table] = time.monotonic()
                reasons[member.address] = str(outcome)
                if blocked is None:
                    blocked = BlockedWait(SAMPLER_LOGGER, "sampler", started)
                blocked.warn_if_due(functools.partial(_reasons_text, reasons))
            elif isinstance(outcome, _GONE):
                self.mark_down(member, outcome)
                last_gone = outcome
            elif isinstance(outcome, BaseException):
                failure = failure or outcome
            else:
                member.starved.pop(table, None)
                self.mark_up(member)
                parts.append((member, outcome))
                taken += len(outcome)
        self._remember(parts)
        if failure is not None:
            raise failure
        if not parts:
            if cancelled is not None and cancelled.is_set():
                return []
            if outage is not None and not self.live():
                raise outage.deadline_error(what)
            raise DeadlineExceededError(
                f"Sample from table {table!r}: no server gave a sample within the timeout: "
                + _reasons_text(reasons)
            )
        return [part for _, part in parts]

    def _plan(
        self, table: str, missing: int, outstanding: dict[Member, int], first_round: bool
    ) -> list[tuple[Member, int, bool]]:
        """Who is asked for how many of the ``missing`` samples, and whether
        each request may wait for the rate limiter."""
        now = time.monotonic()
        idle = [m for m in self.live() if m not in outstanding]
        ready = [m for m in idle if table not in m.starved]
        if ready:
            # A request costs about as much as a hundred samples: a batch is
            # shared out in requests of at least _MIN_SHARE samples, over as
            # many servers as that allows, starting with each in turn.
            start = next(self._turn)
            count = max(1, min(len(ready), missing // _MIN_SHARE))
            targets = [(ready[(start + i) % len(ready)], True) for i in range(count)]
            if first_round:
                # Servers that had nothing are asked again without waiting
                # (every so often), so one that has samples again is found.
                targets += [
                    (m, False)
                    for m in idle
                    if now - m.starved.get(table, now) >= _STARVED_RECHECK_SECONDS
                ]
        elif not outstanding:
            # Nothing anywhere: wait on all, each in turn first (if fewer
            # samples are missing than there are servers, some get no share).
            start = next(self._turn)
            targets = [(idle[(start + i) % len(idle)], True) for i in range(len(idle))]
        else:
            return []
        share, extra = divmod(missing, len(targets)) if targets else (0, 0)
        plan = []
        for index, (member, waits) in enumerate(targets):
            size = min(share + (index < extra), _core.MAX_SAMPLES_PER_CALL)
            if size > 0:
                plan.append((member, size, waits))
        return plan

    def _start_sample(
        self, member: Member, table: str, size: int, wait: float, alone: bool
    ) -> Callable[[], Any]:
        """Starts a sample request on ``member``; returns the function that
        waits for its batch (raising what the request raised)."""
        try:
            transport = self.transport(member)
            start = getattr(transport, "start_sample", None)
            if start is not None:  # remote: gRPC runs the call meanwhile
                return start(table, size, wait)
            sample = functools.partial(transport.sample, table, size, wait)
            if alone:  # nothing else to overlap with: call it when asked
                return sample
        except BaseException as error:  # noqa: BLE001 - raised by the returned function
            return functools.partial(_reraise, error)
        # In-process: the core waits without the GIL, on a pool thread.
        return self._pool.start(sample)

    def _remember(self, parts: list[tuple[Member, Any]]) -> None:
        with self._lock:
            for member, part in parts:
                keys = part.keys.tolist()
                self._owners.update(zip(keys, itertools.repeat(member)))
                self._remembered.append(keys)
                self._num_remembered += len(keys)
            while self._num_remembered > _REMEMBERED_KEYS:
                old = self._remembered.popleft()
                self._num_remembered -= len(old)
                for key in old:
                    self._owners.pop(key, None)

    # --- managing

    def mutate_priorities(
        self,
        table: str,
        updates: Mapping[int, float] | Iterable[tuple[int, float]] | tuple[Any, Any] | None,
        deletes: Iterable[int] | None,
    ) -> tuple[int, int]:
        """Checks every priority first (all or nothing: ValueError before any
        server applies anything), then routes each update and delete to the
        server its key was sampled from, and those of unknown keys to every
        server; a server that is away is skipped. Returns (updated, deleted)
        summed over the servers (each key is held by one)."""
        listed_keys, listed_priorities, delete_keys = _core.priority_updates(updates, deletes)
        keys = np.asarray(listed_keys, np.uint64)
        priorities = np.asarray(listed_priorities, np.float64)
        meta = self.table_info_for_writer(table)
        bad = ~np.isfinite(priorities)
        if meta.prioritized:
            bad |= priorities < 0
        if bad.any():
            index = int(np.argmax(bad))
            allowed = "finite and >= 0 (Prioritized selector)" if meta.prioritized else "finite"
            raise ValueError(
                f"updates: the priority of key {int(keys[index])} for table {table!r} must be "
                f"{allowed}, got {priorities[index]}; nothing was changed"
            )
        return self._route_mutations(table, keys, priorities, delete_keys)

    def _route_mutations(
        self, table: str, keys: np.ndarray, priorities: np.ndarray, delete_keys: list[int]
    ) -> tuple[int, int]:
        """Routes each update and delete to the server its key was sampled
        from, and those of unknown keys to every server."""
        with self._lock:
            owners = self._owners
            update_owner = [owners.get(k) for k in keys.tolist()]
            delete_owner = [owners.get(k) for k in delete_keys]
        members = self.members()
        per_member: dict[Member, tuple[list[int], list[int]]] = {m: ([], []) for m in members}
        for index, owner in enumerate(update_owner):
            for member in (owner,) if owner in per_member else members:
                per_member[member][0].append(index)
        for index, owner in enumerate(delete_owner):
            for member in (owner,) if owner in per_member else members:
                per_member[member][1].append(index)
        involved = [m for m, (u, d) in per_member.items() if u or d]

        def mutate(member: Member) -> Any:
            updates, deletes_here = per_member[member]
            return self.transport(member).mutate_priorities(
                table,
                (keys[updates], priorities[updates]),
                [delete_keys[i] for i in deletes_here],
            )

        # A server that is not there has nothing to update (its items are
        # gone, or come back from its checkpoint with their saved priorities).
        updated = deleted = 0
        for _, outcome in self.call_each(involved, mutate):
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, _GONE):
                    raise outcome
                continue
            updated += outcome[0]
            deleted += outcome[1]
        return updated, deleted

    def reset(self, table: str) -> None:
        """Resets ``table`` on every server (ConnectionError names any not reached)."""
        self.on_every_server(lambda t: t.reset(table), f"Reset of {table!r}")

    def checkpoint(self) -> dict[str, str]:
        """Has every server write a checkpoint: the directories by address
        (ConnectionError at once, naming any server not reached)."""
        return self.on_every_server(lambda t: t.checkpoint(), "Checkpoint", wait_for_one=False)

    def close_client_stream(self) -> None:
        """Ends each server's streams of its client's own calls (see
        protocol.Transport)."""
        for member in self.members_known():
            member.connection.close_client_stream()

    def close(self) -> None:
        """Ends every server's calls and connections (``Client.close()``)."""
        for member in self.members_known():
            member.connection.close()

    def server_infos(self, timeout: float | None) -> dict[str, dict[str, TableInfo]]:
        """Every answering server's tables by name, by address; while none
        answers, waits for one up to ``timeout`` (DeadlineExceededError)."""
        return self._answers(lambda t, left: t.server_info(left), "ServerInfo", timeout)

    def _answers(
        self, call: Callable[[Any, float | None], Any], what: str, timeout: float | None
    ) -> dict[str, Any]:
        """``call(transport, time left)`` on every server, the answers by
        address, leaving out the servers that are not there; while none
        answers, waits for one up to ``timeout`` (DeadlineExceededError)."""
        deadline = deadline_after(timeout)
        outage = None
        while True:
            answers = {}
            last_gone = None
            for member, outcome in self.call_each(
                self.members(), lambda m: call(self.transport(m), remaining(deadline))
            ):
                if isinstance(outcome, _GONE):
                    last_gone = outcome
                elif isinstance(outcome, BaseException):
                    raise outcome
                else:
                    answers[member.address] = outcome
            if answers:
                return answers
            outage = self._wait_for_a_member(outage, last_gone, deadline, what, timeout)

    def priority_histograms(
        self, table: str, bins: int, timeout: float | None
    ) -> dict[str, PriorityHistogram]:
        """Each answering server's histogram of ``table``, by address."""
        return self._answers(
            lambda t, left: t.priority_histogram(table, bins, left), "priority_histogram", timeout
        )

    def priority_histogram(self, table: str, bins: int, timeout: float | None) -> PriorityHistogram:
        """The answering servers' histograms of ``table`` merged into one of
        ``bins`` bins (see resound.priority_histogram.merged: range and total
        exact, each item within one server bin of its own)."""
        return merged(self.priority_histograms(table, bins, timeout).values(), bins)

    def server_info(self, timeout: float | None) -> dict[str, TableInfo]:
        """Each table's info summed over the answering servers."""
        by_table: dict[str, list[TableInfo]] = {}
        for infos in self.server_infos(timeout).values():
            for name, info in infos.items():
                by_table.setdefault(name, []).append(info)
        return {name: combined(infos) for name, infos in by_table.items()}

    def on_every_server(
        self, call: Callable[[Any], Any], what: str, *, wait_for_one: bool = True
    ) -> dict[str, Any]:
        """``call(transport)`` on every server; the results by address.
        ConnectionError naming the servers that did not answer (the call was
        still made on the others). While none answers, waits for one
        (``wait_for_one``; else ConnectionError at once)."""
        outage = None
        while True:
            results = {}
            missed = []
            last_gone = None
            for member, outcome in self.call_each(
                self.members(), lambda m: call(self.transport(m))
            ):
                if isinstance(outcome, _GONE):
                    missed.append(f"{member.address} ({outcome})")
                    last_gone = outcome
                elif isinstance(outcome, BaseException):
                    raise outcome
                else:
                    results[member.address] = outcome
            if results or not wait_for_one:
                break
            outage = self._wait_for_a_member(outage, last_gone, None, what, None)
        if missed:
            done = ", ".join(results) or "none"
            raise ConnectionError(
                f"{what} did not reach {len(missed)} server(s): {'; '.join(missed)}; "
                f"done on: {done}"
            )
        return results
