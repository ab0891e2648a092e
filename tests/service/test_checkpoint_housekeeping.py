"""Where checkpoints of a server without a checkpointer go (one directory of
its own, emptied of older checkpoints, removed when it stops), and periodic
checkpoints that skip writing when no table changed."""

from __future__ import annotations

import logging
import os
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest

import resound
from resound import checkpointers
from resound.errors import CancelledError

from helpers.server_processes import REPLAY_TABLE_TOML, ServerProcess

Q_SIGNATURE = {"x": resound.TensorSpec([3], np.float32)}


def queue() -> resound.Table:
    return resound.Table(
        "q",
        resound.selectors.Prioritized(1.0),
        resound.selectors.Fifo(),
        100,
        resound.rate_limiters.MinSize(1),
        signature=Q_SIGNATURE,
    )


def insert(client: resound.Client, value: float = 0.0, priority: float = 1.0) -> None:
    client.insert({"x": np.full(3, value, np.float32)}, {"q": priority})


def test_checkpoints_without_a_checkpointer_stay_in_one_directory(serve):
    server, client = serve(queue())
    insert(client)
    first = client.checkpoint()
    second = client.checkpoint()
    home = os.path.dirname(first)
    assert os.path.dirname(home) == checkpointers.process_temp_directory()
    assert os.path.dirname(checkpointers.process_temp_directory()) == tempfile.gettempdir()
    assert os.path.dirname(second) == home
    # Only the newest is kept: repeated calls do not pile up.
    assert os.listdir(home) == [os.path.basename(second)]
    assert checkpointers.inspect(second)["tables"][0]["num_items"] == 1
    server.stop()
    assert not os.path.exists(home)
    with pytest.raises(CancelledError, match="stopped"):
        server.checkpoint()


def test_each_server_of_a_process_has_its_own_directory():
    one = resound.Server([queue()], listen=False)
    two = resound.Server([queue()], listen=False)
    try:
        paths = [os.path.dirname(server.checkpoint()) for server in (one, two)]
        assert paths[0] != paths[1]
        assert {os.path.dirname(p) for p in paths} == {checkpointers.process_temp_directory()}
        one.stop()
        assert not os.path.exists(paths[0]) and os.path.exists(paths[1])
    finally:
        one.stop()
        two.stop()
    assert not os.path.exists(paths[1])


def test_a_server_with_a_checkpointer_keeps_its_checkpoints_after_stop(tmp_path):
    server = resound.Server(
        [queue()], listen=False, checkpointer=checkpointers.DefaultCheckpointer(str(tmp_path))
    )
    path = server.checkpoint()
    server.stop()
    assert os.path.exists(checkpointers.checkpoint_file(path))


def test_skip_unchanged_writes_only_after_a_change(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="resound")
    checkpointer = checkpointers.DefaultCheckpointer(str(tmp_path), keep_latest=5)
    server = resound.Server([queue()], listen=False, checkpointer=checkpointer)
    client = server.in_process_client()
    try:
        insert(client, 1.0)
        first = server.checkpoint(skip_unchanged=True)
        caplog.clear()
        assert server.checkpoint(skip_unchanged=True) == first
        assert checkpointer.checkpoints() == [first]
        assert f"checkpoint skipped: no table changed since {first}" in caplog.messages
        # Each kind of change is one: insert, sample, priority update, delete, reset.
        paths = [first]
        key = next(client.sample("q", emit_timesteps=False)).info.key
        for change in (
            lambda: insert(client, 2.0),
            lambda: next(client.sample("q")),
            lambda: client.mutate_priorities("q", {key: 5.0}),
            lambda: client.mutate_priorities("q", deletes=[key]),
        ):
            change()
            paths.append(server.checkpoint(skip_unchanged=True))
            assert paths[-1] != paths[-2]
        assert checkpointer.checkpoints() == paths
        assert server.checkpoint() != paths[-1]  # without skip_unchanged: always
        saved = {(i.key, i.priority, i.times_sampled) for i in server.table("q")._core.snapshot()}
    finally:
        server.stop()
    restored = resound.Server([queue()], listen=False, checkpointer=checkpointer)
    try:
        snapshot = restored.table("q")._core.snapshot()
        assert {(i.key, i.priority, i.times_sampled) for i in snapshot} == saved
        assert len(saved) == 1
        # What it restored is what it holds: nothing to write until a change.
        newest = checkpointer.checkpoints()[-1]
        assert restored.checkpoint(skip_unchanged=True) == newest
        insert(restored.in_process_client(), 3.0)
        assert restored.checkpoint(skip_unchanged=True) != newest
    finally:
        restored.stop()


def test_a_skipped_checkpoint_is_written_if_the_last_one_is_gone(tmp_path):
    checkpointer = checkpointers.DefaultCheckpointer(str(tmp_path))
    server = resound.Server([queue()], listen=False, checkpointer=checkpointer)
    try:
        first = server.checkpoint(skip_unchanged=True)
        os.remove(checkpointers.checkpoint_file(first))
        again = server.checkpoint(skip_unchanged=True)
        assert os.path.exists(checkpointers.checkpoint_file(again))
    finally:
        server.stop()


def test_skip_unchanged_must_be_a_bool():
    server = resound.Server([queue()], listen=False)
    try:
        with pytest.raises(ValueError, match="skip_unchanged must be True or False"):
            server.checkpoint(skip_unchanged="yes")  # type: ignore[arg-type]
    finally:
        server.stop()


def test_periodic_checkpoints_skip_when_nothing_changed(tmp_path: Path):
    config = tmp_path / "server.toml"
    config.write_text(REPLAY_TABLE_TOML)
    directory = tmp_path / "checkpoints"
    served = ServerProcess(
        config, "--checkpoint-dir", str(directory), "--checkpoint-every", "0.1",
        "--keep-checkpoints", "5",
    )  # fmt: skip
    try:
        port = int(served.wait_for(r"serving 1 table\(s\) on \S+:(\d+)").group(1))
        first = served.wait_for(r"checkpoint written: (\S+)").group(1)
        served.wait_for("checkpoint skipped: no table changed since " + re.escape(first))
        client = resound.Client(f"127.0.0.1:{port}")
        client.insert({"obs": np.zeros(3, np.float32)}, priorities={"replay": 1.0})
        second = served.wait_for(r"checkpoint written: (\S+)").group(1)
        served.wait_for("checkpoint skipped: no table changed since " + re.escape(second))
    finally:
        assert served.stop() == 0
    assert [p.name for p in sorted(directory.iterdir())] == [Path(first).name, Path(second).name]
    assert checkpointers.inspect(second)["tables"][0]["num_items"] == 1
