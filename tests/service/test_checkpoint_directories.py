"""Checkpoint directories of table files and a manifest: tables that share no
chunk are in files of their own, a periodic checkpoint links the files of
unchanged tables from the last one (docs/checkpoint-format.md), and a
manifest is checked like any checkpoint file."""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path

import numpy as np
import pytest

import resound
from resound import checkpointers
from resound.errors import CheckpointError

from helpers.checkpoint_files import file_of, records_of

SIGNATURE = {"x": resound.TensorSpec([3], np.float32)}


def table(name: str) -> resound.Table:
    return resound.Table(
        name,
        resound.selectors.Prioritized(1.0),
        resound.selectors.Fifo(),
        100,
        resound.rate_limiters.MinSize(1),
        signature=SIGNATURE,
    )


def tables() -> list[resound.Table]:
    """'demos' and 'replay' share chunks (one insert goes to both); 'online'
    has its own."""
    return [table("demos"), table("replay"), table("online")]


def insert(client: resound.Client, value: float, into: dict[str, float]) -> None:
    client.insert({"x": np.full(3, value, np.float32)}, into)


def inode(directory: str, name: str) -> int:
    return os.stat(os.path.join(directory, name)).st_ino


def contents(server: resound.Server) -> dict[str, set[tuple[int, float, int]]]:
    return {
        name: {(i.key, i.priority, i.times_sampled) for i in t._core.snapshot()}
        for name, t in server.tables.items()
    }


@pytest.fixture
def served(tmp_path):
    checkpointer = checkpointers.DefaultCheckpointer(str(tmp_path), keep_latest=1)
    server = resound.Server(tables(), listen=False, checkpointer=checkpointer)
    client = server.in_process_client()
    insert(client, 1.0, {"demos": 1.0, "replay": 1.0})
    insert(client, 2.0, {"online": 1.0})
    yield server, client, checkpointer
    server.stop()


def test_tables_sharing_chunks_share_a_file_and_others_have_their_own(served):
    server, _, checkpointer = served
    path = server.checkpoint()
    assert sorted(os.listdir(path)) == ["checkpoint.rsnd", "tables-0.rsnd", "tables-1.rsnd"]
    files = checkpointer.last_save["files"]
    assert [(f["name"], f["tables"], f["reused"]) for f in files] == [
        ("tables-0.rsnd", ["demos", "replay"], False),
        ("tables-1.rsnd", ["online"], False),
    ]
    summary = checkpointers.inspect(path)
    assert [t["name"] for t in summary["tables"]] == ["demos", "replay", "online"]
    assert summary["num_chunks"] == 2  # the shared chunk once
    assert summary["file_bytes"] == sum(
        os.path.getsize(os.path.join(path, n)) for n in os.listdir(path)
    )


def test_unchanged_tables_are_linked_and_the_changed_written(served, tmp_path, caplog):
    server, client, checkpointer = served
    first = server.checkpoint(skip_unchanged=True)
    caplog.set_level(logging.INFO, logger="resound")
    insert(client, 3.0, {"online": 2.0})  # only 'online' changes
    second = server.checkpoint(skip_unchanged=True)
    assert second != first
    assert checkpointer.checkpoints() == [second]  # keep_latest=1 removed the first...
    # ... but the file of the unchanged tables lives on, linked into the new one.
    assert [f["reused"] for f in checkpointer.last_save["files"]] == [True, False]
    assert os.stat(os.path.join(second, "tables-0.rsnd")).st_nlink == 1
    message = next(m for m in caplog.messages if m.startswith("checkpoint written"))
    assert message.endswith("linked unchanged from the last: demos, replay")
    saved = contents(server)
    restored = resound.Server(tables(), listen=False, checkpointer=checkpointer)
    try:
        assert contents(restored) == saved
        assert restored.table("online").info.current_size == 2
    finally:
        restored.stop()


def test_a_change_to_one_of_the_tables_sharing_a_file_writes_that_file(served):
    server, client, checkpointer = served
    first = server.checkpoint(skip_unchanged=True)
    linked_before = inode(first, "tables-1.rsnd")
    next(client.sample("replay"))  # a sample counts times_sampled: a change
    second = server.checkpoint(skip_unchanged=True)
    assert [f["reused"] for f in checkpointer.last_save["files"]] == [False, True]
    assert inode(second, "tables-1.rsnd") == linked_before
    restored = resound.Server(tables(), listen=False, checkpointer=checkpointer)
    try:
        assert contents(restored) == contents(server)
    finally:
        restored.stop()


def test_a_group_that_changed_shape_is_written_again(served):
    server, client, checkpointer = served
    server.checkpoint(skip_unchanged=True)
    # 'online' now shares a chunk with 'replay': the three are one group.
    insert(client, 4.0, {"replay": 1.0, "online": 1.0})
    path = server.checkpoint(skip_unchanged=True)
    files = checkpointer.last_save["files"]
    assert [(f["tables"], f["reused"]) for f in files] == [(["demos", "replay", "online"], False)]
    assert sorted(os.listdir(path)) == ["checkpoint.rsnd", "tables-0.rsnd"]


def test_without_skip_unchanged_every_file_is_written(served):
    server, client, checkpointer = served
    first = server.checkpoint()
    insert(client, 3.0, {"online": 2.0})
    server.checkpoint()
    assert [f["reused"] for f in checkpointer.last_save["files"]] == [False, False]
    assert first not in checkpointer.checkpoints()


def test_a_file_that_cannot_be_linked_is_written(served):
    server, client, checkpointer = served
    first = server.checkpoint(skip_unchanged=True)
    os.remove(os.path.join(first, "tables-0.rsnd"))  # someone removed it
    insert(client, 3.0, {"online": 2.0})
    second = server.checkpoint(skip_unchanged=True)
    assert [f["reused"] for f in checkpointer.last_save["files"]] == [False, False]
    restored = resound.Server(tables(), listen=False, checkpointer=checkpointer)
    try:
        assert contents(restored) == contents(server)
        assert checkpointer.checkpoints() == [second]
    finally:
        restored.stop()


def test_the_one_file_layout_of_earlier_versions_still_restores(served, tmp_path):
    server, _, _ = served
    saved = contents(server)
    old = tmp_path / "old" / "checkpoint-20240101T000000.000000000Z"
    old.mkdir(parents=True)
    resound._core.save_checkpoint(
        [t._core for t in server.tables.values()], str(old / checkpointers.FILE_NAME)
    )
    checkpointer = checkpointers.DefaultCheckpointer(str(tmp_path / "old"))
    restored = resound.Server(tables(), listen=False, checkpointer=checkpointer)
    try:
        assert contents(restored) == saved
        assert checkpointers.inspect(old)["files"] == []
        # Nothing to link from a one-file checkpoint: all written anew.
        next(restored.in_process_client().sample("online"))
        path = restored.checkpoint(skip_unchanged=True)
        assert [f["reused"] for f in checkpointer.last_save["files"]] == [False, False]
        assert sorted(os.listdir(path)) == ["checkpoint.rsnd", "tables-0.rsnd", "tables-1.rsnd"]
    finally:
        restored.stop()


# --- manifests no server writes


def file_record(file: str, names: list[str]) -> tuple[int, bytes]:
    payload = struct.pack("<Q", len(file)) + file.encode() + struct.pack("<I", len(names))
    for name in names:
        payload += struct.pack("<Q", len(name)) + name.encode()
    return (4, payload)


def rewrite_manifest(path: str, records: list[tuple[int, bytes]]) -> None:
    manifest = Path(path) / checkpointers.FILE_NAME
    header = manifest.read_bytes()[:16]
    manifest.write_bytes(file_of(header, records))


@pytest.mark.parametrize(
    "records, message",
    [
        ([file_record("../tables-0.rsnd", ["demos"])], "is not tables-<k>.rsnd"),
        ([file_record("/etc/passwd", ["demos"])], "is not tables-<k>.rsnd"),
        ([file_record("tables-00.rsnd", ["demos"])], "is not tables-<k>.rsnd"),
        ([file_record("tables-0.rsnd", [])], "holds no table"),
        (
            [file_record("tables-0.rsnd", ["demos"]), file_record("tables-0.rsnd", ["online"])],
            "named twice",
        ),
        (
            [file_record("tables-0.rsnd", ["demos"]), file_record("tables-1.rsnd", ["demos"])],
            "table 'demos' is named twice",
        ),
        (
            [file_record("tables-0.rsnd", ["demos", "replay"]), (1, b"")],
            "a record of type 1 in a manifest",
        ),
        (
            [file_record("tables-1.rsnd", ["demos", "replay"])],
            "it holds tables 'online' but its manifest says 'demos', 'replay'",
        ),
        ([file_record("tables-7.rsnd", ["demos"])], "tables-7.rsnd"),
    ],
)
def test_a_manifest_no_server_wrote_is_refused_and_nothing_restored(served, records, message):
    server, _, checkpointer = served
    path = server.checkpoint()
    rewrite_manifest(path, records)
    fresh = tables()
    with pytest.raises((CheckpointError, OSError), match=message):
        resound.Server(fresh, listen=False, checkpointer=checkpointer)
    assert [t.info.current_size for t in fresh] == [0, 0, 0]
    with pytest.raises((CheckpointError, OSError), match=message):
        checkpointers.inspect(path)


def test_a_damaged_table_file_restores_no_table_at_all(served):
    server, _, checkpointer = served
    path = server.checkpoint()
    damaged = Path(path) / "tables-1.rsnd"  # the second file: the first reads fine
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 0xFF
    os.remove(damaged)  # (a link would damage the original too)
    damaged.write_bytes(bytes(data))
    fresh = tables()
    with pytest.raises(CheckpointError, match="tables-1.rsnd"):
        resound.Server(fresh, listen=False, checkpointer=checkpointer)
    assert [t.info.current_size for t in fresh] == [0, 0, 0]


def test_a_manifest_is_a_checkpoint_file_of_file_records(served):
    server, _, _ = served
    path = server.checkpoint()
    records = records_of((Path(path) / checkpointers.FILE_NAME).read_bytes())
    assert [kind for kind, _ in records] == [4, 4]
    assert records[1] == file_record("tables-1.rsnd", ["online"])
