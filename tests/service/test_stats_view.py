"""The live view (``resound-server stats``, ``resound top``): frames drawn
from readings of real servers, rates over the time between two readings,
one plain frame when stdout is not a terminal, redrawn frames on one until
Ctrl-C, and the exit statuses of the commands."""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import resound
from resound import stats_view
from resound.priority_histogram import PriorityHistogram

from helpers.server_processes import server_command
from helpers.waiting import SAFETY


def tables() -> list[resound.Table]:
    return [
        resound.Table(
            "replay",
            resound.selectors.Prioritized(0.8),
            resound.selectors.Fifo(),
            max_size=10,
            rate_limiter=resound.rate_limiters.MinSize(1),
        ),
        resound.Table.queue("queue", 5),
    ]


class Clock:
    """A clock the test sets: readings taken at chosen times, without sleeping."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_frame_shows_each_table_with_rates_between_two_readings(serve):
    _, client = serve(*tables())
    clock = Clock()
    before = stats_view.read(client, bins=4, timeout=SAFETY, clock=clock)
    for priority in (1.0, 1.0, 2.0, 4.0):
        client.insert([np.zeros(2, np.float32)], priorities={"replay": priority})
    client.sample_batch("replay", 2)
    clock.now += 2.0
    after = stats_view.read(client, bins=4, timeout=SAFETY, clock=clock)
    frame = stats_view.render(before, after, width=80)
    assert "\x1b" not in frame
    assert "table 'replay'" in frame and "table 'queue'" in frame
    assert "4 / 10 items" in frame and "0 / 5 items" in frame
    assert "40.0%" in frame
    # 4 inserts and 2 samples in 2 seconds.
    assert "inserts 2.0/s  samples 1.0/s" in frame
    assert "inserts 0.0/s  samples 0.0/s" in frame  # the queue
    # [1, 4] in 4 bins holds 2, 1, 0 and 1 items.
    assert "priority  1 |█▄ ▄| 4  (peak bin 2)" in frame
    assert "(no items)" in frame


def test_the_first_frame_has_no_rates_yet(serve):
    _, client = serve(*tables())
    client.insert([0], priorities={"queue": 1.0})
    frame = stats_view.render(None, stats_view.read(client, bins=4, timeout=SAFETY))
    assert "inserts -  samples -" in frame
    assert "done: 1 inserts, 0 samples" in frame
    assert "all 1 at 1" in frame  # one priority: one bin


def test_a_counter_that_went_down_is_a_reset_not_a_negative_rate(serve):
    _, client = serve(*tables())
    clock = Clock()
    client.insert([0], priorities={"queue": 1.0})
    before = stats_view.read(client, bins=4, timeout=SAFETY, clock=clock)
    client.reset("queue")
    clock.now += 1.0
    frame = stats_view.render(before, stats_view.read(client, bins=4, timeout=SAFETY, clock=clock))
    queue = frame[frame.index("table 'queue'") :]
    assert "inserts -  samples -" in queue


def test_sparkline_heights_follow_the_counts():
    assert stats_view.sparkline(PriorityHistogram((1, 0, 4, 8), 0.0, 1.0)) == "▁ ▄█"
    assert stats_view.sparkline(PriorityHistogram(())) == ""


def test_once_prints_one_plain_frame_even_on_a_terminal(listening):
    out = Terminal(stop=0)
    assert stats_view.main([f"127.0.0.1:{listening.port}", "--once"], out=out) == 0
    assert "table 'replay'" in out.getvalue() and "\x1b" not in out.getvalue()


def test_several_servers_get_a_section_each():
    servers = [resound.Server(tables()) for _ in range(2)]
    try:
        addresses = [f"127.0.0.1:{s.port}" for s in servers]
        resound.Client(addresses[1]).insert([0], priorities={"queue": 1.0})
        out = io.StringIO()
        # One target naming both, as resound.Client takes it.
        assert stats_view.main([",".join(addresses), "--once"], out=out) == 0
        sections = out.getvalue().split("server ")[1:]
        assert [section.split()[0] for section in sections] == addresses
        assert "0 / 5 items" in sections[0] and "1 / 5 items" in sections[1]
    finally:
        for server in servers:
            server.stop()


class Terminal(io.StringIO):
    """A stdout that says it is a terminal and presses Ctrl-C at frame
    ``stop``; ``on_frame(n)`` runs as frame n starts."""

    def __init__(self, stop: int, on_frame: Callable[[int], None] = lambda n: None) -> None:
        super().__init__()
        self.frames = 0
        self.stop = stop
        self.on_frame = on_frame

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if text.startswith("\x1b[H"):
            self.frames += 1
            if self.frames == self.stop:
                raise KeyboardInterrupt
            self.on_frame(self.frames)
        return super().write(text)


def test_on_a_terminal_frames_are_redrawn_until_ctrl_c():
    server = resound.Server(tables())
    try:
        out = Terminal(stop=3)
        status = stats_view.main([f"127.0.0.1:{server.port}", "--every", "0.01"], out=out)
        assert status == 0
        text = out.getvalue()
        assert text.startswith("\x1b[?25l")  # cursor hidden while drawing
        assert text.endswith("\x1b[?25h")  # and shown again
        assert text.count("\x1b[H\x1b[J") == 2 and "(Ctrl-C to quit)" in text
        # The second frame has rates (the first has none).
        assert "inserts 0.0/s" in text.split("\x1b[H\x1b[J")[2]
    finally:
        server.stop()


def test_a_server_that_goes_away_is_shown_as_not_answering():
    server = resound.Server(tables())
    address = f"127.0.0.1:{server.port}"

    def stop_the_server(frame: int) -> None:
        if frame == 1:
            server.stop()

    out = Terminal(stop=3, on_frame=stop_the_server)
    args = [address, "--every", "0.01", "--timeout", "0.2"]
    assert stats_view.main(args, out=out) == 0
    last = out.getvalue().split("\x1b[H\x1b[J")[2]
    assert f"server {address}: not answering now" in last


def run(*args: str) -> subprocess.CompletedProcess[str]:
    # The commands as users run them; each takes 1-2 s, most of it starting
    # an interpreter that imports grpc.
    return subprocess.run(args, capture_output=True, text=True, timeout=SAFETY)


@pytest.fixture
def listening() -> Any:
    server = resound.Server(tables())
    resound.Client(f"127.0.0.1:{server.port}").insert([0], priorities={"replay": 1.0})
    yield server
    server.stop()


@pytest.mark.slow  # a process: ~2 s on a busy 2-core machine
def test_the_server_command_prints_the_tables_and_exits_0(listening):
    result = run(*server_command("stats", f"127.0.0.1:{listening.port}", "--once"))
    assert result.returncode == 0, result.stderr
    assert f"server 127.0.0.1:{listening.port}  (2 tables)" in result.stdout
    assert "1 / 10 items" in result.stdout


@pytest.mark.slow  # a process: ~2 s on a busy 2-core machine
def test_resound_top_is_the_same_view(listening):
    # stdout is a pipe: one plain frame even without --once.
    result = run(sys.executable, "-m", "resound", "top", f"127.0.0.1:{listening.port}")
    assert result.returncode == 0, result.stderr
    assert "table 'queue'" in result.stdout and "\x1b" not in result.stdout


@pytest.mark.slow  # a process: ~2 s on a busy 2-core machine
def test_a_dead_address_exits_1_naming_it():
    with socket_bound() as port:
        result = run(*server_command("stats", f"127.0.0.1:{port}", "--timeout", "0.2"))
    assert result.returncode == 1
    assert f"127.0.0.1:{port}" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--every", "0"], "--every must be"),
        (["--bins", "0"], r"--bins must be an integer in [1, 1000]"),
        (["--timeout", "nan"], "--timeout must be"),
    ],
)
def test_bad_arguments_exit_2_naming_them(capsys, args, message):
    with pytest.raises(SystemExit) as exited:
        stats_view.main(["127.0.0.1:1", *args])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def socket_bound() -> Any:
    """A port nobody listens on (bound, not listening, for the test's time)."""
    import contextlib
    import socket

    @contextlib.contextmanager
    def bound() -> Any:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            yield sock.getsockname()[1]

    return bound()
