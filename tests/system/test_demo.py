"""``python -m resound``, the README's first command: the embedded demo runs,
writes and samples, and prints plain progress lines when its output is not a
terminal (a log file, a CI job) rather than a bar redrawn with carriage
returns."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from helpers.waiting import SAFETY


@pytest.mark.slow
def test_the_demo_writes_and_samples_and_prints_plain_lines_into_a_pipe() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "resound", "--seconds", "2", "--actors", "1"],
        capture_output=True,
        text=True,
        timeout=SAFETY * 3,
    )
    assert result.returncode == 0, result.stderr
    assert "\r" not in result.stdout
    progress = re.findall(r"^ *\d+\.\d s +\d+%  items +[\d,]+", result.stdout, re.MULTILINE)
    assert progress, result.stdout
    inserted = re.search(r"^inserted +([\d,]+) items", result.stdout, re.MULTILINE)
    sampled = re.search(r"^sampled +([\d,]+) items", result.stdout, re.MULTILINE)
    assert inserted and sampled, result.stdout
    assert int(inserted.group(1).replace(",", "")) > 0
    assert int(sampled.group(1).replace(",", "")) > 0
