"""Checkpoints (issue 5; docs/semantics.md §9, docs/compatibility.md items 11
and 15): client.checkpoint() over both transports, DefaultCheckpointer
restoring at server start, the same items, priorities, counters and sampling
order afterwards, keeping only the newest checkpoints (and only its own
files), refusing damaged files with a clear error, saving while writers and
samplers run, and a process killed in the middle of a save."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import resound
from resound import checkpointers, rate_limiters, selectors
from resound.errors import CheckpointError

from helpers.checkpoint_files import file_of, records_of, table_file
from helpers.waiting import SAFETY

SELECTORS: dict[str, Callable[[], Any]] = {
    "uniform": selectors.Uniform,
    "prioritized": lambda: selectors.Prioritized(0.8),
    "fifo": selectors.Fifo,
    "lifo": selectors.Lifo,
    "min_heap": selectors.MinHeap,
    "max_heap": selectors.MaxHeap,
}
LIMITERS: dict[str, Callable[[], Any]] = {
    "min_size": lambda: rate_limiters.MinSize(1),
    "sample_to_insert": lambda: rate_limiters.SampleToInsertRatio(2.0, 1, 100.0),
    "queue": lambda: rate_limiters.Queue(60),
    "stack": lambda: rate_limiters.Stack(60),
}


def make_tables(sampler: str = "fifo", limiter: str = "min_size") -> list[resound.Table]:
    deterministic = sampler in ("fifo", "lifo", "min_heap", "max_heap")
    return [
        resound.Table(
            "main",
            SELECTORS[sampler](),
            selectors.Fifo() if deterministic else selectors.MinHeap(),
            60,
            LIMITERS[limiter](),
            max_times_sampled=3 if limiter in ("min_size", "sample_to_insert") else 0,
        ),
        resound.Table("other", selectors.MaxHeap(), selectors.Fifo(), 60, rate_limiters.MinSize(1)),
    ]


def fill(client: resound.Client, limiter: str, seed: int) -> None:
    """Items with tied priorities, some sampled and updated."""
    rng = random.Random(seed)
    with client.trajectory_writer(num_keep_alive_refs=3) as writer:
        for step in range(40):
            writer.append({"obs": np.full(4, step, np.float32), "step": np.int64(step)})
            if step >= 2:
                trajectory = {
                    "obs": writer.history["obs"][-3:],
                    "step": writer.history["step"][-1],
                }
                writer.create_item("main", float(rng.randrange(3)), trajectory)
                writer.create_item("other", float(rng.randrange(3)), trajectory)
        writer.flush()
    if limiter in ("min_size", "sample_to_insert"):
        for sample in client.sample("main", 15, emit_timesteps=False):
            if rng.random() < 0.5:
                client.mutate_priorities("main", updates={sample.info.key: float(rng.randrange(3))})
    if limiter in ("queue", "stack"):
        list(client.sample("main", 10, emit_timesteps=False))


def state(server: resound.Server) -> dict[str, Any]:
    """What must survive: each table's items (key, priority, times sampled,
    insertion time, trajectory) in insertion order, its counters (the rate
    limiter's, with their completed inserts, samples and deletes) and its
    statistics."""
    out = {}
    for name, table in server.tables.items():
        info = table.info
        items = [
            (s.key, s.priority, s.times_sampled, s.inserted_at, s.trajectory)
            for s in table._core.snapshot()
        ]
        out[name] = (
            items,
            info.rate_limiter_info,
            info.current_size,
            info.num_episodes,
            info.num_deleted_episodes,
            info.num_unique_samples,
            info.num_chunks,
        )
    return out


def sampled_keys(client: resound.Client, count: int) -> list[int]:
    return [int(s.info.key) for s in client.sample("main", count, emit_timesteps=False)]


@pytest.mark.parametrize("limiter", sorted(LIMITERS))
@pytest.mark.parametrize("sampler", sorted(SELECTORS))
def test_round_trip_keeps_items_counters_and_order(
    tmp_path: Any, sampler: str, limiter: str
) -> None:
    checkpointer = checkpointers.DefaultCheckpointer(tmp_path)
    original = resound.Server(
        make_tables(sampler, limiter), listen=False, checkpointer=checkpointer
    )
    client = original.in_process_client()
    fill(client, limiter, seed=hash((sampler, limiter)) % 1000)
    path = client.checkpoint()
    assert os.path.dirname(path) == str(tmp_path)
    restored = resound.Server(
        make_tables(sampler, limiter), listen=False, checkpointer=checkpointer
    )
    assert state(restored) == state(original)
    if sampler in ("fifo", "lifo", "min_heap", "max_heap") and limiter in ("min_size", "queue"):
        # The same order from here on, ties included.
        count = min(10, restored.table("main").info.current_size)
        assert sampled_keys(restored.in_process_client(), count) == sampled_keys(client, count)
    original.stop()
    restored.stop()


def test_counters_and_data_survive_exactly(tmp_path: Any) -> None:
    checkpointer = checkpointers.DefaultCheckpointer(tmp_path)
    original = resound.Server(make_tables("fifo"), listen=False, checkpointer=checkpointer)
    client = original.in_process_client()
    fill(client, "min_size", seed=3)
    client.checkpoint()
    restored = resound.Server(make_tables("fifo"), listen=False, checkpointer=checkpointer)
    for name in ("main", "other"):
        a = original.table(name).info
        b = restored.table(name).info
        assert (a.current_size, a.num_unique_samples, a.num_deleted_episodes) == (
            b.current_size,
            b.num_unique_samples,
            b.num_deleted_episodes,
        )
        assert a.rate_limiter_info == b.rate_limiter_info
    original_samples = list(client.sample("other", 5, emit_timesteps=False))
    restored_samples = list(restored.in_process_client().sample("other", 5, emit_timesteps=False))
    for x, y in zip(original_samples, restored_samples, strict=True):
        assert x.info.key == y.info.key and x.info.priority == y.info.priority
        assert len(x.data) == len(y.data) == 2  # obs and step, flat (no signature)
        for column_x, column_y in zip(x.data, y.data, strict=True):
            np.testing.assert_array_equal(column_x, column_y)


def test_checkpoint_over_grpc_returns_the_servers_path(
    serve: Callable[..., tuple[resound.Server, resound.Client]], tmp_path: Any
) -> None:
    server, client = serve(*make_tables())
    server._checkpointer = checkpointers.DefaultCheckpointer(tmp_path)
    client.insert({"x": np.arange(3)}, priorities={"main": 1.0, "other": 2.0})
    path = client.checkpoint()
    # A directory holding the file, as Reverb returns a directory.
    assert os.path.dirname(path) == str(tmp_path) and os.path.isdir(path)
    # One table file: the tables share their chunk, so they are in one file.
    assert sorted(os.listdir(path)) == [checkpointers.FILE_NAME, "tables-0.rsnd"]
    summary = checkpointers.inspect(path)
    assert checkpointers.inspect(os.path.join(path, checkpointers.FILE_NAME)) == summary
    assert [t["name"] for t in summary["tables"]] == ["main", "other"]
    assert [t["num_items"] for t in summary["tables"]] == [1, 1]
    assert summary["num_chunks"] == 1  # shared by both tables, stored once
    assert [(f["name"], f["tables"]) for f in summary["files"]] == [
        ("tables-0.rsnd", ["main", "other"])
    ]


def test_keeps_the_newest_and_never_deletes_other_files(tmp_path: Any) -> None:
    foreign = [
        "notes.txt",
        "checkpoint-latest.rsnd",
        "checkpoint-20990101T000000.000000000Z.rsnd.bak",
    ]
    for name in foreign:
        (tmp_path / name).write_text("not ours")
    # Directories named like its own, but not checkpoints: left alone too.
    for name in ("checkpoint-latest", "checkpoint-20000101T000000.000000000Z"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "notes.txt").write_text("not ours")
        foreign.append(name)
    checkpointer = checkpointers.DefaultCheckpointer(tmp_path, keep_latest=2)
    server = resound.Server(make_tables(), listen=False, checkpointer=checkpointer)
    client = server.in_process_client()
    paths = []
    for step in range(4):
        client.insert({"x": np.int64(step)}, priorities={"main": 1.0})
        paths.append(client.checkpoint())
    assert len(set(paths)) == 4
    assert checkpointer.checkpoints() == paths[-2:]
    assert sorted(os.listdir(tmp_path)) == sorted(
        [*foreign, *(os.path.basename(p) for p in paths[-2:])]
    )
    restored = resound.Server(make_tables(), listen=False, checkpointer=checkpointer)
    assert restored.table("main").info.current_size == 4  # the newest


def test_fallback_is_loaded_only_without_own_checkpoints(tmp_path: Any) -> None:
    first = checkpointers.DefaultCheckpointer(tmp_path / "first")
    server = resound.Server(make_tables(), listen=False, checkpointer=first)
    server.in_process_client().insert({"x": np.int64(1)}, priorities={"main": 1.0})
    fallback = server.checkpoint()
    second = checkpointers.DefaultCheckpointer(
        tmp_path / "second", fallback_checkpoint_path=fallback
    )
    restored = resound.Server(make_tables(), listen=False, checkpointer=second)
    assert restored.table("main").info.current_size == 1
    # A fresh start with an empty directory and no fallback: empty tables.
    empty = resound.Server(
        make_tables(), listen=False, checkpointer=checkpointers.DefaultCheckpointer(tmp_path / "x")
    )
    assert empty.table("main").info.current_size == 0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"path": ""}, "path must be a nonempty"),
        ({"path": "d", "group": "g"}, "group must be empty"),
        ({"path": "d", "keep_latest": 0}, "keep_latest must be an int >= 1"),
        ({"path": "d", "keep_latest": True}, "keep_latest must be an int >= 1"),
        ({"path": "d", "fallback_checkpoint_path": 3}, "fallback_checkpoint_path must be"),
    ],
)
def test_checkpointer_arguments_are_checked(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        checkpointers.DefaultCheckpointer(**kwargs)


def test_a_checkpoint_table_the_server_lacks_is_refused_clearly(tmp_path: Any) -> None:
    # As in Reverb, whose restore fails for a table the server does not have.
    checkpointer = checkpointers.DefaultCheckpointer(tmp_path)
    server = resound.Server(make_tables("fifo"), listen=False, checkpointer=checkpointer)
    server.in_process_client().insert({"x": np.int64(1)}, priorities={"main": 1.0})
    server.checkpoint()
    tables = make_tables("lifo")[:1]
    with pytest.raises(ValueError, match="has table 'other', which the server does not have"):
        resound.Server(tables, listen=False, checkpointer=checkpointer)
    info = tables[0].info  # all or nothing: 'main' kept its own configuration, empty
    assert (info.sampler_options.WhichOneof("distribution"), info.current_size) == ("lifo", 0)


def test_the_checkpoints_table_configuration_wins_with_a_warning_per_setting(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    signature = {"x": resound.TensorSpec([], np.int64)}
    saved = resound.Table(
        "main",
        selectors.Prioritized(0.8),
        selectors.Fifo(),
        60,
        rate_limiters.SampleToInsertRatio(2.0, 1, 100.0),
        max_times_sampled=3,
        signature=signature,
    )
    checkpointer = checkpointers.DefaultCheckpointer(tmp_path)
    server = resound.Server(
        [saved, resound.Table.queue("untouched", 5)], listen=False, checkpointer=checkpointer
    )
    client = server.in_process_client()
    for value in range(4):
        client.insert({"x": np.int64(value)}, priorities={"main": float(value + 1)})
    list(client.sample("main", 2))
    before = server.table("main").info
    server.checkpoint()
    server.stop()

    # The server is started with other settings for 'main', the same for
    # 'other' (not in the checkpoint) and 'untouched'.
    main = resound.Table(
        "main", selectors.Lifo(), selectors.MinHeap(), 10, rate_limiters.MinSize(2)
    )
    other = resound.Table(
        "other", selectors.Uniform(), selectors.Fifo(), 7, rate_limiters.MinSize(1)
    )
    with caplog.at_level("WARNING", logger="resound"):
        restored = resound.Server(
            [main, other, resound.Table.queue("untouched", 5)],
            listen=False,
            checkpointer=checkpointer,
        )
    info = restored.table("main").info
    assert restored.table("main") is main  # the server's table object, reconfigured
    assert info.sampler_options.WhichOneof("distribution") == "prioritized"
    assert info.sampler_options.prioritized.priority_exponent == 0.8
    assert info.remover_options.WhichOneof("distribution") == "fifo"
    assert (info.max_size, info.max_times_sampled, info.current_size) == (60, 3, 4)
    assert info.rate_limiter_info == before.rate_limiter_info  # settings and counters
    assert main.signature == signature and info.signature == signature
    with pytest.raises(ValueError):  # the saved signature is enforced
        restored.in_process_client().insert({"x": np.float32(1)}, priorities={"main": 1.0})
    changed = [r.getMessage() for r in caplog.records if "restoring checkpoint" in r.getMessage()]
    settings = sorted(m.split(": ")[2].split(" was ")[0] for m in changed)
    assert settings == [
        "max_size",
        "max_times_sampled",
        "rate_limiter",
        "remover",
        "sampler",
        "signature",
    ], changed
    assert all("table 'main'" in m for m in changed)
    assert any("sampler was lifo, is now prioritized(0.8)" in m for m in changed), changed
    assert any("max_size was 10, is now 60" in m for m in changed), changed
    # A server table the checkpoint lacks stays as configured, and empty.
    assert (restored.table("other").info.max_size, restored.table("other").info.current_size) == (
        7,
        0,
    )
    restored.stop()


def test_max_bytes_stays_the_servers_and_a_restore_past_it_is_refused(tmp_path: Any) -> None:
    # Checkpoints do not hold max_bytes (Reverb has none): the server's applies.
    def table(max_bytes: int | None) -> resound.Table:
        return resound.Table(
            "main", selectors.Fifo(), selectors.Fifo(), 10, rate_limiters.MinSize(1),
            max_bytes=max_bytes,
        )  # fmt: skip

    checkpointer = checkpointers.DefaultCheckpointer(tmp_path)
    server = resound.Server([table(None)], listen=False, checkpointer=checkpointer)
    for value in range(3):
        server.in_process_client().insert(np.full(256, value, np.float32), {"main": 1.0})
    server.checkpoint()
    roomy = resound.Server([table(1 << 20)], listen=False, checkpointer=checkpointer)
    assert (roomy.table("main").info.max_bytes, roomy.table("main").info.current_size) == (
        1 << 20,
        3,
    )
    tight = table(2_000)  # one 1 KB item fits, three do not
    with pytest.raises(ValueError, match="more than the table's max_bytes 2000"):
        resound.Server([tight], listen=False, checkpointer=checkpointer)
    assert tight.info.current_size == 0


def test_a_restore_into_tables_configured_alike_warns_nothing(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    checkpointer = checkpointers.DefaultCheckpointer(tmp_path)
    server = resound.Server(make_tables(), listen=False, checkpointer=checkpointer)
    server.in_process_client().insert({"x": np.int64(1)}, priorities={"main": 1.0})
    server.checkpoint()
    with caplog.at_level("WARNING", logger="resound"):
        restored = resound.Server(make_tables(), listen=False, checkpointer=checkpointer)
    assert restored.table("main").info.current_size == 1
    assert not [r for r in caplog.records if "restoring checkpoint" in r.getMessage()]


def test_checkpoint_files_of_the_earlier_layout_still_load(tmp_path: Any) -> None:
    source = checkpointers.DefaultCheckpointer(tmp_path / "new")
    server = resound.Server(make_tables(), listen=False, checkpointer=source)
    server.in_process_client().insert({"x": np.int64(1)}, priorities={"main": 1.0})
    file = table_file(server.checkpoint())  # a one-file checkpoint (of "main")
    legacy = tmp_path / "old"
    legacy.mkdir()
    name = "checkpoint-20240101T000000.000000000Z.rsnd"  # one file in the directory
    os.link(file, legacy / name)
    checkpointer = checkpointers.DefaultCheckpointer(legacy, keep_latest=1)
    assert checkpointer.checkpoints() == [str(legacy / name)]
    restored = resound.Server(make_tables(), listen=False, checkpointer=checkpointer)
    assert restored.table("main").info.current_size == 1
    newer = restored.checkpoint()  # the new layout, sorting after the old file
    assert checkpointer.checkpoints() == [newer]  # keep_latest=1 removed the old file
    assert sorted(os.listdir(legacy)) == [os.path.basename(newer)]


def test_chunks_of_a_dtype_now_refused_at_insert_still_load_from_checkpoints(
    tmp_path: Any,
) -> None:
    # Servers used to store chunks of sizes numpy has no type for ('<f3');
    # refusing one when loading would refuse the whole checkpoint, every
    # good item with it.
    server = resound.Server(
        make_tables(), listen=False, checkpointer=checkpointers.DefaultCheckpointer(tmp_path)
    )
    client = server.in_process_client()
    client.insert({"x": np.bytes_(b"abc")}, priorities={"main": 1.0})  # a '|S3' chunk
    client.insert({"x": np.float32(2.5)}, priorities={"main": 1.0})
    data = Path(table_file(server.checkpoint())).read_bytes()
    client.reset("main")  # its chunks go (the chunk store is the process's)
    records = records_of(data)
    (index,) = [i for i, (_, payload) in enumerate(records) if b"|S3" in payload]
    kind, payload = records[index]
    records[index] = (kind, payload.replace(b"|S3", b"<f3"))  # the same size: 3 bytes a step
    old = tmp_path / "old.rsnd"
    old.write_bytes(file_of(data[:16], records))
    tables = make_tables()
    resound.Server(
        tables,
        listen=False,
        checkpointer=checkpointers.DefaultCheckpointer(
            tmp_path / "none", fallback_checkpoint_path=old
        ),
    )
    assert tables[0].info.current_size == 2
    dtypes = [item.chunks[0].dtype for item in tables[0]._core.snapshot()]
    assert dtypes == ["<f3", "<f4"]


@pytest.mark.parametrize("layout", ["directory", "file"])
def test_a_checkpoint_that_is_not_a_regular_file_is_refused_naming_it(
    tmp_path: Any, layout: str
) -> None:
    # A FIFO in a checkpoint's place: its open waited for a writer, hanging
    # the server at start. (The test holds a writer end, so that a regression
    # fails on the message instead of hanging.)
    older = checkpointers.DefaultCheckpointer(tmp_path)
    resound.Server(make_tables(), listen=False, checkpointer=older).checkpoint()
    if layout == "directory":
        (tmp_path / "checkpoint-29990101T000000.000000000Z").mkdir()
        fifo = tmp_path / "checkpoint-29990101T000000.000000000Z" / checkpointers.FILE_NAME
        refused = fifo.parent
    else:
        fifo = refused = tmp_path / "checkpoint-29990101T000000.000000000Z.rsnd"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    try:
        checkpointer = checkpointers.DefaultCheckpointer(tmp_path)
        # The newest by name: refused, not passed over for the older one.
        assert checkpointer.latest() == str(refused)
        message = f"checkpoint {fifo} cannot be loaded: it is a FIFO, not a regular file"
        with pytest.raises(CheckpointError, match=message):
            resound.Server(make_tables(), listen=False, checkpointer=checkpointer)
        with pytest.raises(CheckpointError, match=message):
            checkpointers.inspect(refused)
        fallback = checkpointers.DefaultCheckpointer(
            tmp_path / "empty", fallback_checkpoint_path=fifo
        )
        with pytest.raises(CheckpointError, match=message):
            resound.Server(make_tables(), listen=False, checkpointer=fallback)
        with pytest.raises(CheckpointError, match="/dev/null cannot be loaded: it is a character"):
            checkpointers.inspect("/dev/null")
        # Saves go on, and never delete it (not one of the checkpointer's files).
        server = resound.Server(make_tables(), listen=False)
        assert checkpointer.save(list(server.tables.values())) in checkpointer.checkpoints()
        assert fifo.exists()
    finally:
        os.close(writer)


def test_damaged_checkpoints_are_refused_with_the_file_named(tmp_path: Any) -> None:
    source = checkpointers.DefaultCheckpointer(tmp_path / "good")
    server = resound.Server(make_tables(), listen=False, checkpointer=source)
    fill(server.in_process_client(), "min_size", seed=1)
    with open(table_file(server.checkpoint()), "rb") as file:
        good = file.read()
    rng = random.Random(0)
    damaged = tmp_path / "damaged.rsnd"
    for trial in range(300):
        data = bytearray(good)
        if trial % 3 == 0:
            del data[rng.randrange(len(data)) :]
        else:
            for _ in range(rng.randrange(1, 4)):
                data[rng.randrange(len(data))] ^= rng.randrange(1, 256)
        damaged.write_bytes(bytes(data))
        checkpointer = checkpointers.DefaultCheckpointer(
            tmp_path / "empty", fallback_checkpoint_path=damaged
        )
        tables = make_tables()
        with pytest.raises(CheckpointError, match=f"checkpoint {damaged} cannot be loaded"):
            resound.Server(tables, listen=False, checkpointer=checkpointer)
        assert all(t.info.current_size == 0 for t in tables)  # nothing half restored
    damaged.write_text("hello")
    with pytest.raises(CheckpointError, match="not a resound checkpoint"):
        checkpointers.inspect(damaged)
    with pytest.raises(FileNotFoundError):
        checkpointers.inspect(tmp_path / "missing.rsnd")


def test_saving_while_writers_and_samplers_run_is_consistent_and_stalls_nobody(
    tmp_path: Any,
) -> None:
    # A table of ~200 MB: the save takes long enough for inserts and samples
    # to land while it runs (they only wait while references are taken).
    table = resound.Table(
        "big", selectors.Uniform(), selectors.Fifo(), 4_000, rate_limiters.MinSize(1)
    )
    server = resound.Server(
        [table], listen=False, checkpointer=checkpointers.DefaultCheckpointer(tmp_path)
    )
    payload = np.ones(12_500, np.float32)  # 50 KB
    with server.in_process_client().trajectory_writer(num_keep_alive_refs=1) as writer:
        for step in range(4_000):
            writer.append({"x": payload * step})
            writer.create_item("big", 1.0, {"x": writer.history["x"][-1]})
    started, finished = threading.Event(), threading.Event()
    during: dict[str, int] = {}

    def write(name: str) -> None:
        with server.in_process_client().trajectory_writer(num_keep_alive_refs=1) as writer:
            started.wait(SAFETY)
            count = 0
            while not finished.is_set() and count < 1_000_000:
                writer.append({"x": payload})
                writer.create_item("big", 1.0, {"x": writer.history["x"][-1]})
                count += 1
            during[name] = count

    def sample(name: str) -> None:
        client = server.in_process_client()
        started.wait(SAFETY)
        count = 0
        while not finished.is_set() and count < 1_000_000:
            count += len(client.sample_batch("big", 4).info.key)
        during[name] = count

    workers = [threading.Thread(target=write, args=(f"writer{i}",)) for i in range(2)]
    workers += [threading.Thread(target=sample, args=(f"sampler{i}",)) for i in range(2)]
    for worker in workers:
        worker.start()
    started.set()
    path = server.checkpoint()
    finished.set()
    for worker in workers:
        worker.join(SAFETY)
    # Everyone got work done while the save ran (a save under the table lock
    # would have let none of them past its first instant).
    assert all(during[name] >= 10 for name in during) and len(during) == 4, during
    # Consistent: every saved item's chunk is in the file, and it loads.
    summary = checkpointers.inspect(path)
    assert summary["tables"][0]["num_items"] == summary["num_chunks"] == 4_000
    restored = resound.Table(
        "big", selectors.Uniform(), selectors.Fifo(), 4_000, rate_limiters.MinSize(1)
    )
    resound.Server(
        [restored],
        listen=False,
        checkpointer=checkpointers.DefaultCheckpointer(
            tmp_path / "none", fallback_checkpoint_path=path
        ),
    )
    assert restored.info.current_size == 4_000


KILLED_SAVER = """
import sys, numpy as np, resound
from resound import checkpointers, rate_limiters, selectors
table = resound.Table("big", selectors.Fifo(), selectors.Fifo(), 4000, rate_limiters.MinSize(1))
server = resound.Server([table], listen=False,
                        checkpointer=checkpointers.DefaultCheckpointer(sys.argv[1]))
client = server.in_process_client()
with client.trajectory_writer(num_keep_alive_refs=1) as writer:
    for step in range(4000):
        writer.append({"x": np.full(25_000, step, np.float32)})
        writer.create_item("big", 1.0, {"x": writer.history["x"][-1]})
print(client.checkpoint(), flush=True)
client.insert({"x": np.zeros(3, np.float32)}, priorities={"big": 1.0})
print("saving", flush=True)
while True:
    client.checkpoint()
"""


def temporaries(directory: Any) -> list[str]:
    """The paths of every ``*.tmp`` file under ``directory``."""
    return sorted(
        os.path.join(root, name)
        for root, _, names in os.walk(directory)
        for name in names
        if name.endswith(".tmp")
    )


@pytest.mark.slow
def test_a_process_killed_mid_save_leaves_the_previous_checkpoint_and_no_temporary(
    tmp_path: Any,
) -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", KILLED_SAVER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    first = process.stdout.readline().strip()
    assert process.stdout.readline().strip() == "saving"
    # Kill it while the table file of a save of ~400 MB is being written.
    while not [path for path in temporaries(tmp_path) if "tables-" in path]:
        if process.poll() is not None:
            pytest.fail("the saver ended by itself")
    process.send_signal(signal.SIGKILL)
    process.wait(SAFETY)
    process.stdout.close()
    # The manifest's temporary and the table file's, named with the saver's pid.
    manifest, left = temporaries(tmp_path)  # (sorted: checkpoint.rsnd... first)
    assert os.path.basename(manifest) == f"{checkpointers.FILE_NAME}.{process.pid}.tmp"
    assert os.path.basename(left) == f"tables-0.rsnd.{process.pid}.tmp"
    latest = checkpointers.DefaultCheckpointer(tmp_path).checkpoints()[-1]
    assert latest >= first
    table = resound.Table("big", selectors.Fifo(), selectors.Fifo(), 4000, rate_limiters.MinSize(1))
    resound.Server([table], listen=False, checkpointer=checkpointers.DefaultCheckpointer(tmp_path))
    assert table.info.current_size == 4000
    # The next server's start removed the killed save's temporary, and its
    # directory with it: a crash loop does not fill the disk.
    assert temporaries(tmp_path) == []
    assert not os.path.exists(os.path.dirname(left))


def gone_pid() -> int:
    """The pid of a process that ran and has ended (and was reaped)."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait(SAFETY)
    return process.pid


def test_temporaries_of_processes_gone_are_removed_at_start_and_after_each_save(
    tmp_path: Any,
) -> None:
    live = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                            stdin=subprocess.PIPE)  # fmt: skip
    try:
        gone = gone_pid()

        def left(stamp: str, owner: int | None, directory: str | None = None) -> Any:
            folder = tmp_path / (directory or f"checkpoint-20240101T00000{stamp}.000000000Z")
            folder.mkdir(exist_ok=True)
            name = checkpointers.FILE_NAME + ("" if owner is None else f".{owner}") + ".tmp"
            (folder / name).write_bytes(b"\0" * 1000)
            return folder / name

        stale = left("0", gone)
        mine = left("1", os.getpid())  # an earlier process with this pid
        saving = left("2", live.pid)  # a save under way in another process
        shared = left("3", gone)
        (shared.parent / "notes.txt").write_text("someone else's")
        not_ours = left("", gone, directory="elsewhere")
        earlier = left("4", None)  # no pid (earlier versions): whose, unknown
        # Killed after its table files, before the manifest: they go too.
        killed_late = left("6", gone)
        (killed_late.parent / "tables-0.rsnd").write_bytes(b"\0" * 1000)
        (saving.parent / "tables-0.rsnd").write_bytes(b"\0" * 1000)  # still being saved
        checkpointer = checkpointers.DefaultCheckpointer(tmp_path)
        server = resound.Server(make_tables(), listen=False, checkpointer=checkpointer)
        assert temporaries(tmp_path) == sorted(map(str, [saving, not_ours, earlier]))
        assert not stale.parent.exists() and not mine.parent.exists()
        assert not killed_late.parent.exists()
        assert sorted(os.listdir(saving.parent)) == [saving.name, "tables-0.rsnd"]
        assert sorted(os.listdir(shared.parent)) == ["notes.txt"]
        # A save removes those left since.
        again = left("5", gone_pid())
        path = server.in_process_client().checkpoint()
        assert not again.parent.exists()
        assert temporaries(tmp_path) == sorted(map(str, [saving, not_ours, earlier]))
        assert checkpointer.checkpoints() == [path]
    finally:
        assert live.stdin is not None
        live.stdin.close()  # ends it
        live.wait(SAFETY)


def test_a_clock_stepping_back_does_not_make_the_newest_checkpoint_look_older(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpointer = checkpointers.DefaultCheckpointer(tmp_path, keep_latest=1)
    server = resound.Server(make_tables(), listen=False, checkpointer=checkpointer)
    client = server.in_process_client()
    client.insert({"x": np.int64(1)}, priorities={"main": 1.0})
    first = client.checkpoint()
    # The clock jumps an hour back: the next save must still sort last.
    earlier = checkpointers.time.time_ns() - 3_600 * 10**9
    monkeypatch.setattr(checkpointers.time, "time_ns", lambda: earlier)
    client.insert({"x": np.int64(2)}, priorities={"main": 1.0})
    second = client.checkpoint()
    assert checkpointer.checkpoints() == [second] and second != first  # first was pruned
    restored = resound.Server(make_tables(), listen=False, checkpointer=checkpointer)
    assert restored.table("main").info.current_size == 2
