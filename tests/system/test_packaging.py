"""What the installed distribution says about itself: its name, one version
written once, the license, its commands and requirements, ``--version`` on
both commands, and that the tests import the installed package."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest

import resound

from helpers.paths import REPO_ROOT
from helpers.server_processes import server_command
from helpers.waiting import SAFETY

if sys.version_info >= (3, 11):
    import tomllib
else:  # a runtime dependency there (pyproject.toml)
    import tomli as tomllib


def installed_distribution() -> importlib.metadata.Distribution:
    try:
        return importlib.metadata.distribution("resound-rl")
    except importlib.metadata.PackageNotFoundError:
        # tools/sanitize_python.sh runs a staged copy on PYTHONPATH: nothing
        # is installed there to have metadata (the README's test command
        # installs the package, and runs this).
        pytest.skip("resound runs from a staged source tree, not an installed distribution")


def pyproject() -> dict:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]


def test_the_distribution_is_resound_rl_with_the_package_version_and_license() -> None:
    distribution = installed_distribution()
    assert distribution.version == resound.__version__
    assert distribution.metadata["License"] == "Apache-2.0"
    files = [str(f) for f in distribution.files or []]
    assert any(f.endswith("LICENSE") for f in files), files
    assert (REPO_ROOT / "LICENSE").read_text().startswith("Apache License\nVersion 2.0")


def normal(requirement: str) -> str:
    """A requirement without the spaces and quote style a backend may change."""
    return requirement.replace(" ", "").replace("'", '"')


def test_the_metadata_lists_the_commands_python_versions_and_requirements() -> None:
    distribution, project = installed_distribution(), pyproject()
    commands = {e.name: e.value for e in distribution.entry_points if e.group == "console_scripts"}
    assert commands == {
        "resound": "resound.__main__:main",
        "resound-server": "resound.server_command:main",
    }
    assert distribution.metadata["Requires-Python"] == project["requires-python"] == ">=3.10"
    # Requires-Dist: the runtime dependencies, then each extra's with its marker.
    expected = [normal(r) for r in project["dependencies"]]
    for extra, requirements in project["optional-dependencies"].items():
        expected += [normal(f'{r}; extra == "{extra}"') for r in requirements]
    assert sorted(normal(r) for r in distribution.requires or []) == sorted(expected)


def test_the_tests_import_the_installed_package() -> None:
    # What pip installed is what runs here: the wheel's copy in site-packages
    # (the README's `pip install ".[test]"`, tools/check_wheel.sh), or this
    # source tree for an editable install; never a stale copy elsewhere.
    distribution = installed_distribution()
    direct_url = json.loads(distribution.read_text("direct_url.json") or "{}")
    imported = Path(resound.__file__).resolve()
    if direct_url.get("dir_info", {}).get("editable", False):
        assert imported == REPO_ROOT / "python" / "resound" / "__init__.py"
    else:
        assert imported == Path(str(distribution.locate_file("resound/__init__.py"))).resolve()


def test_the_version_is_written_once() -> None:
    project = pyproject()
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
