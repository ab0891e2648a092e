"""``resound-server`` as a subprocess: it serves the tables of its TOML
config until SIGTERM (then exits 0), explains itself in --help, and refuses a
bad config with a message naming the key, before starting anything."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import urllib.request
from pathlib import Path

import numpy as np
import pytest

import resound
from resound import checkpointers
from resound.server_command import EXAMPLE_CONFIG

from helpers.server_processes import ServerProcess, refused_start, server_command
from helpers.waiting import SAFETY, wait_until

GOOD_CONFIG = """
[server]
host = "127.0.0.1"

[[tables]]
name = "replay"
sampler = "prioritized"
priority_exponent = 0.8
remover = "fifo"
max_size = 100
rate_limiter = { kind = "min_size", min_size_to_sample = 1 }
signature = { obs = { shape = [3], dtype = "float32" } }

[[tables]]
name = "queue"
kind = "queue"
max_size = 10
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "server.toml"
    path.write_text(GOOD_CONFIG)
    return path


def test_serves_the_configured_tables_until_sigterm(config):
    served = ServerProcess(config)
    try:
        port = int(served.wait_for(r"serving 2 table\(s\) on 127\.0\.0\.1:(\d+)").group(1))
        client = resound.Client(f"127.0.0.1:{port}")
        info = client.server_info()
        assert sorted(info) == ["queue", "replay"]
        assert info["replay"].max_size == 100 and info["queue"].max_times_sampled == 1
        assert info["replay"].signature == {"obs": resound.TensorSpec([3], np.float32)}
        client.insert({"obs": np.arange(3, dtype=np.float32)}, priorities={"replay": 1.0})
        sample = next(client.sample("replay", emit_timesteps=False, timeout=SAFETY))
        np.testing.assert_array_equal(sample.data["obs"] if isinstance(sample.data, dict)
                                      else sample.data[0], [[0, 1, 2]])  # fmt: skip
        with pytest.raises(ValueError):
            client.insert({"obs": np.zeros(4, np.float32)}, priorities={"replay": 1.0})
    finally:
        assert served.stop() == 0
    served.wait_for("received SIGTERM, stopping")


@pytest.mark.parametrize("where", ["option", "config"])
def test_metrics_are_served_where_the_start_line_says(config, where):
    if where == "option":
        served = ServerProcess(config, "--metrics-port", "0")
    else:
        config.write_text(GOOD_CONFIG.replace("[server]", "[server]\nmetrics_port = 0"))
        served = ServerProcess(config)
    try:
        match = served.wait_for(
            r"serving 2 table\(s\) on 127\.0\.0\.1:(\d+) \(plaintext\), "
            r"metrics on (http://127\.0\.0\.1:\d+/metrics)"
        )
        client = resound.Client(f"127.0.0.1:{match.group(1)}")
        client.insert({"obs": np.zeros(3, np.float32)}, priorities={"replay": 1.0})
        with urllib.request.urlopen(match.group(2), timeout=SAFETY) as answer:
            text = answer.read().decode()
        assert 'resound_table_inserts_total{table="replay"} 1.0' in text
        assert 'resound_table_max_items{table="queue"} 10.0' in text
    finally:
        assert served.stop() == 0


def test_help_explains_the_options_with_an_example():
    result = subprocess.run(
        server_command("--help"), capture_output=True, text=True, timeout=SAFETY
    )
    assert result.returncode == 0
    for text in (
        "--config", "--host", "--port", "--metrics-port", "[[tables]]", "rate_limiter", "0.0.0.0",
    ):  # fmt: skip
        assert text in result.stdout


def test_the_example_config_is_valid(tmp_path):
    from resound.server_command import load_config, tables_from_config

    path = tmp_path / "example.toml"
    path.write_text(EXAMPLE_CONFIG)
    tables = tables_from_config(load_config(str(path)))
    assert [table.name for table in tables] == ["replay", "queue"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (('sampler = "prioritized"', 'sampler = "random"'), "'random' is not one of uniform"),
        (("max_size = 100", "max_size = -5"), "max_size must be >= 1"),
        (('name = "replay"\n', ""), "tables[0].name is required"),
        (("priority_exponent = 0.8\n", ""), "priority_exponent: a finite number >= 0"),
        (("priority_exponent = 0.8", "priority_exponent = -1"), "finite number >= 0, got -1"),
        (('kind = "min_size"', 'kind = "fast"'), "'fast' is not one of min_size"),
        (('dtype = "float32"', 'dtype = "float33"'), "float33"),
        (("max_size = 10\n", "max_size = 10\ncolour = 1\n"), "colour"),
        (('host = "127.0.0.1"', "host = 5"), "server.host"),
        (("[server]", "[server]\nport = 70000"), "server.port"),
        (("[server]", "[server]\nmetrics_port = -1"), "server.metrics_port must be an integer"),
        (("[[tables]]", "[[tables]"), "not valid TOML"),
    ],
)
def test_a_bad_config_exits_non_zero_naming_the_key(tmp_path, change, message):
    path = tmp_path / "bad.toml"
    old, new = change
    assert old in GOOD_CONFIG
    path.write_text(GOOD_CONFIG.replace(old, new, 1))
    result = subprocess.run(
        server_command("--config", str(path)), capture_output=True, text=True, timeout=SAFETY
    )
    assert result.returncode == 2
    assert message in result.stderr, result.stderr
    assert "serving" not in result.stderr  # nothing was started


def test_a_stats_line_per_table_follows_the_traffic(config):
    served = ServerProcess(config, "--stats-every", "0.2")
    try:
        port = int(served.wait_for(r"serving 2 table\(s\) on 127\.0\.0\.1:(\d+)").group(1))
        client = resound.Client(f"127.0.0.1:{port}")
        for _ in range(3):
            client.insert({"obs": np.zeros(3, np.float32)}, priorities={"replay": 1.0})
        served.wait_for(r"table 'queue': 0 / 10 items")
        line = served.wait_for(r"table 'replay': 3 / 100 items, [\d.]+ MiB, [\d,]+ inserts/s")
        assert "samples/s" in line.string
    finally:
        assert served.stop() == 0


@pytest.mark.slow
def test_log_level_warning_leaves_out_the_info_lines(config, tmp_path):
    bad = subprocess.run(
        server_command("--config", str(config), "--stats-every", "-1"),
        capture_output=True, text=True, timeout=SAFETY,
    )  # fmt: skip
    assert bad.returncode == 2 and "--stats-every must be" in bad.stderr
    with socket.socket() as probe:  # a port nothing listens on now
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    served = ServerProcess(config, "--log-level", "warning", "--port", str(port))
    try:  # answering means it logged its start already, had it been asked to
        assert sorted(resound.Client(f"127.0.0.1:{port}").server_info(timeout=SAFETY)) == [
            "queue",
            "replay",
        ]
    finally:
        status = served.stop(signal.SIGINT)
    lines = []
    while (line := served.lines.get(timeout=SAFETY)) != "":
        lines.append(line)
    assert status == 0
    assert not [line for line in lines if "serving" in line or "restoring" in line], lines


def test_port_0_serves_on_a_free_port(config):
    served = ServerProcess(config, "--port", "0")
    try:
        port = int(served.wait_for(r"serving 2 table\(s\) on 127\.0\.0\.1:(\d+)").group(1))
        assert port > 0
        assert sorted(resound.Client(f"127.0.0.1:{port}").server_info()) == ["queue", "replay"]
    finally:
        assert served.stop() == 0


@pytest.mark.parametrize("where", ["a file", "under a file"])
def test_a_checkpoint_dir_it_cannot_use_fails_at_start(config, tmp_path, where):
    path = tmp_path / "taken"
    path.write_text("")
    if where == "under a file":
        path = path / "checkpoints"
    result = subprocess.run(
        server_command("--config", str(config), "--checkpoint-dir", str(path)),
        capture_output=True, text=True, timeout=SAFETY,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert f"--checkpoint-dir {path}" in result.stderr
    assert "serving" not in result.stderr  # nothing was started


def test_a_missing_config_file_is_reported(tmp_path):
    result = subprocess.run(
        server_command("--config", str(tmp_path / "nope.toml")), capture_output=True, text=True,
        timeout=SAFETY,
    )  # fmt: skip
    assert result.returncode == 2 and "cannot read config" in result.stderr


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_config_that_is_not_a_regular_file_is_refused_naming_it(tmp_path, kind):
    # Opening a FIFO waits for a writer, and /dev/zero never ends: both hung
    # the server at start (refused_start times out after SAFETY seconds).
    if kind == "fifo":
        path = tmp_path / "server.toml"
        os.mkfifo(path)
        what = "a FIFO"
    else:
        path, what = Path("/dev/null"), "a character device"  # as /dev/zero, but finite
    message = refused_start("--config", str(path))
    assert f"cannot read config: {path} is {what}, not a regular file" in message


@pytest.mark.slow
def test_a_fifo_named_like_the_newest_checkpoint_stops_the_server_naming_it(config, tmp_path):
    directory = tmp_path / "checkpoints"
    directory.mkdir()
    fifo = directory / "checkpoint-20260101T000000.000000000Z.rsnd"
    os.mkfifo(fifo)
    message = refused_start("--config", str(config), "--checkpoint-dir", str(directory))
    assert f"checkpoint {fifo} cannot be loaded: it is a FIFO, not a regular file" in message
    assert "serving" not in message
    report = subprocess.run(
        server_command("inspect", str(fifo)), capture_output=True, text=True, timeout=SAFETY
    )
    assert report.returncode == 2 and f"{fifo} cannot be loaded: it is a FIFO" in report.stderr


def serving_port(served: ServerProcess) -> int:
    return int(served.wait_for(r"serving 2 table\(s\) on 127\.0\.0\.1:(\d+)").group(1))


@pytest.mark.slow
def test_checkpoints_on_stop_and_restores_at_start(config, tmp_path):
    directory = tmp_path / "checkpoints"
    served = ServerProcess(config, "--checkpoint-dir", str(directory), "--checkpoint-on-stop")
    try:
        served.wait_for("no checkpoint in .*: starting empty")
        client = resound.Client(f"127.0.0.1:{serving_port(served)}")
        for value in range(3):
            obs = np.full(3, value, np.float32)
            client.insert({"obs": obs}, priorities={"replay": 1.0 + value})
    finally:
        assert served.stop() == 0
    written = served.wait_for(r"checkpoint written: (\S+)").group(1)
    assert Path(written).parent == directory
    again = ServerProcess(config, "--checkpoint-dir", str(directory))
    try:
        again.wait_for(f"restoring {written}")
        info = resound.Client(f"127.0.0.1:{serving_port(again)}").server_info()
        assert info["replay"].current_size == 3
        assert info["replay"].rate_limiter_info.insert_stats.completed == 3
    finally:
        assert again.stop() == 0


@pytest.mark.slow
def test_checkpoints_periodically_and_inspect_reports_them(config, tmp_path):
    directory = tmp_path / "checkpoints"
    served = ServerProcess(
        config, "--checkpoint-dir", str(directory), "--checkpoint-every", "0.2",
        "--keep-checkpoints", "1",
    )  # fmt: skip
    copy = tmp_path / "copy"  # a checkpoint directory, as the server writes them

    def a_checkpoint_holds_the_item() -> bool:
        # The server replaces its one checkpoint every 0.2 s: copy it first.
        for path in reversed(checkpointers.DefaultCheckpointer(directory).checkpoints()):
            shutil.rmtree(copy, ignore_errors=True)
            try:
                shutil.copytree(path, copy)
            except (FileNotFoundError, shutil.Error):
                continue  # replaced meanwhile
            return checkpointers.inspect(copy)["tables"][0]["num_items"] == 1
        return False

    try:
        client = resound.Client(f"127.0.0.1:{serving_port(served)}")
        client.insert({"obs": np.zeros(3, np.float32)}, priorities={"replay": 1.0})
        served.wait_for(r"checkpoint written: (\S+)")
        wait_until(a_checkpoint_holds_the_item, "a periodic checkpoint holding the item")
    finally:
        assert served.stop() == 0
    (kept,) = directory.iterdir()  # older ones were deleted
    # The manifest and a file of each table (they share no chunk).
    names = sorted(p.name for p in kept.iterdir())
    assert kept.is_dir() and names == [checkpointers.FILE_NAME, "tables-0.rsnd", "tables-1.rsnd"]
    # inspect takes the directory (as client.checkpoint() returns it) or its file.
    for path in (copy, copy / checkpointers.FILE_NAME):
        report = subprocess.run(
            server_command("inspect", str(path)), capture_output=True, text=True, timeout=SAFETY
        )
        assert report.returncode == 0, report.stderr
        assert f"checkpoint {path}" in report.stdout
        assert "table 'replay': 1 items; sampler prioritized, remover fifo" in report.stdout
        assert "table 'queue': 0 items; sampler fifo, remover fifo" in report.stdout
        assert "file tables-0.rsnd:" in report.stdout and "table(s) 'replay'" in report.stdout
        assert "bytes of data; 2 table(s)" in report.stdout


@pytest.mark.slow
def test_inspect_refuses_damaged_files_and_bad_checkpoint_options(config, tmp_path):
    damaged = tmp_path / "damaged.rsnd"
    damaged.write_bytes(b"RSNDCKPT" + bytes(20))
    report = subprocess.run(
        server_command("inspect", str(damaged)), capture_output=True, text=True, timeout=SAFETY
    )
    assert report.returncode == 2
    assert f"checkpoint {damaged} cannot be loaded: its header checksum" in report.stderr
    for args, message in [
        (["--checkpoint-every", "5"], "need --checkpoint-dir"),
        (["--checkpoint-dir", str(tmp_path), "--checkpoint-every", "0"], "must be a number"),
        (["--checkpoint-dir", str(tmp_path), "--keep-checkpoints", "0"], "must be >= 1"),
    ]:
        assert message in refused_start("--config", str(config), *args)


def test_a_damaged_checkpoint_stops_the_server_before_it_serves(config, tmp_path):
    directory = tmp_path / "checkpoints"
    directory.mkdir()
    (directory / "checkpoint-20260101T000000.000000000Z.rsnd").write_bytes(b"garbage")
    result = subprocess.run(
        server_command("--config", str(config), "--checkpoint-dir", str(directory)),
        capture_output=True,
        text=True,
        timeout=SAFETY,
    )
    assert result.returncode == 2
    assert "not a resound checkpoint" in result.stderr and "serving" not in result.stderr
