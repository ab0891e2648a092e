"""``resound-server`` run as a process: its command line, a start it refuses,
and a running server whose log lines a test waits for."""

from __future__ import annotations

import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from helpers.waiting import SAFETY

# A resound-server config table: Uniform sampling of up to 100,000 items,
# ready to sample from the first one.
REPLAY_TABLE_TOML = """
[[tables]]
name = "replay"
sampler = "uniform"
remover = "fifo"
max_size = 100000
rate_limiter = { kind = "min_size", min_size_to_sample = 1 }
"""


def server_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "resound.server_command", *args]


def refused_start(*args: str) -> str:
    """Runs ``resound-server`` with ``args``, expecting it to refuse to start
    (exit status 2); what it printed on stderr."""
    result = subprocess.run(server_command(*args), capture_output=True, text=True, timeout=SAFETY)
    assert result.returncode == 2, (result.returncode, result.stderr)
    return result.stderr


class ServerProcess:
    """A resound-server process (``--config config`` and ``args``) and the
    lines it logs."""

    def __init__(self, config: Path, *args: str) -> None:
        self.process = subprocess.Popen(
            server_command("--config", str(config), *args),
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        self._start_reader()

    def _start_reader(self) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Signals the server, waits for it to exit; its exit status."""
        self.process.send_signal(sig)
        status = self.process.wait(timeout=SAFETY)
        self._reader.join(SAFETY)
        assert self.process.stderr is not None
        self.process.stderr.close()
        return status

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.put(line)
        self.lines.put("")

    def wait_for(self, pattern: str) -> re.Match[str]:
        """The first line to come that matches ``pattern``; fails after SAFETY
        seconds in all (a server logging periodically never goes quiet)."""
        seen = []
        deadline = time.monotonic() + SAFETY
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(
                    f"the server logged no line matching {pattern!r}: {''.join(seen)}"
                ) from None
            seen.append(line)
            assert line, f"the server exited before logging {pattern!r}: {''.join(seen)}"
            match = re.search(pattern, line)
            if match:
                return match
