"""What the installed distribution says about itself: its name, one version
written once, the license, and ``--version`` on both commands."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import pytest

import resound

from helpers.paths import REPO_ROOT
from helpers.server_processes import server_command
from helpers.waiting import SAFETY

if sys.version_info >= (3, 11):
    import tomllib
else:  # a runtime dependency there (pyproject.toml)
    import tomli as tomllib


def test_the_distribution_is_resound_rl_with_the_package_version_and_license() -> None:
    try:
        distribution = importlib.metadata.distribution("resound-rl")
    except importlib.metadata.PackageNotFoundError:
        # tools/sanitize_python.sh runs a staged copy on PYTHONPATH: nothing
        # is installed there to have metadata (the README's test command
        # installs the package, and runs this).
        pytest.skip("resound runs from a staged source tree, not an installed distribution")
    assert distribution.version == resound.__version__
    assert distribution.metadata["License"] == "Apache-2.0"
    files = [str(f) for f in distribution.files or []]
    assert any(f.endswith("LICENSE") for f in files), files
    assert (REPO_ROOT / "LICENSE").read_text().startswith("Apache License\nVersion 2.0")


def test_the_version_is_written_once() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "resound-rl"
    assert "version" not in project and "version" in project["dynamic"]
    assert f"## {resound.__version__}" in (REPO_ROOT / "CHANGELOG.md").read_text()


def test_both_commands_print_their_version() -> None:
    for command, name in (
        ([sys.executable, "-m", "resound", "--version"], "resound"),
        (server_command("--version"), "resound-server"),  # no --config needed
    ):
        result = subprocess.run(command, capture_output=True, text=True, timeout=SAFETY)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == f"{name} {resound.__version__}"
