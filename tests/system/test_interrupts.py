"""Ctrl-C reaches a main thread that waits for a rate limiter: embedded
calls wait in short slices, so Python can run its signal handlers."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# The child blocks in the given call on an empty or full queue; a helper
# thread sends SIGINT once the core reports the call waiting. A child still
# running after 45 s writes every thread's stack to stderr and exits, so that
# a hang shows where it is in the test's failure.
CHILD = textwrap.dedent(
    """
    import faulthandler
    faulthandler.dump_traceback_later(45, exit=True)
    import os, signal, threading, time
    # Python leaves SIGINT ignored if it was at start, as it is for a job
    # started in the background by a shell without job control (and for
    # everything such a job starts): take Python's own handler in any case.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import numpy as np
    import resound

    server = resound.Server([resound.Table.queue('q', 1)], listen=False)
    client = server.in_process_client()
    core = server.table('q')._core
    {setup}

    def interrupt_when_waiting():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if core.info().rate_limiter['{counter}'] > 0:
                os.kill(os.getpid(), signal.SIGINT)
                return
            time.sleep(0.001)  # polling the counter, not synchronising by time

    threading.Thread(target=interrupt_when_waiting, daemon=True).start()
    try:
        {call}
    except KeyboardInterrupt:
        print('interrupted')
    """
)

CASES = {
    "sample": ("", "waiting_samples", "next(client.sample('q'))"),
    "sample_batch": ("", "waiting_samples", "client.sample_batch('q', 2)"),
    "insert": (
        "client.insert(np.zeros(2), priorities={'q': 1.0})",
        "waiting_inserts",
        "client.insert(np.zeros(2), priorities={'q': 1.0})",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_ctrl_c_interrupts_a_blocked_call(case: str) -> None:
    setup, counter, call = CASES[case]
    source = CHILD.format(setup=setup, counter=counter, call=call)
    result = subprocess.run(
        [sys.executable, "-c", source], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "interrupted"
