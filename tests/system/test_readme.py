"""The README's usage example runs as written and does what it says."""

from __future__ import annotations

import re

import pytest

from helpers.paths import REPO_ROOT

README = REPO_ROOT / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_readme_has_a_usage_example() -> None:
    assert _python_blocks(), "README.md lost its ```python usage example"


@pytest.mark.parametrize("index", range(len(_python_blocks())))
def test_readme_python_example_runs(index: int, capsys: pytest.CaptureFixture[str]) -> None:
    namespace: dict[str, object] = {}
    exec(compile(_python_blocks()[index], f"README.md[python block {index}]", "exec"), namespace)
    printed = capsys.readouterr().out.split("\n")
    # Two samples of 10-step observation sequences, then the table size: 91
    # items (steps 10..100 each created one).
    assert printed[0].endswith("(10, 4)") and printed[1].endswith("(10, 4)")
    assert printed[2] == "91"
    namespace["server"].stop()  # type: ignore[attr-defined]
