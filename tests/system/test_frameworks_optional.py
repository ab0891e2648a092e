"""TensorFlow, PyTorch and JAX stay optional: ``import resound`` imports none
of them, and what needs one says which ``pip install`` is missing.

Each check runs in a fresh interpreter where the frameworks cannot be
imported (``sys.modules[name] = None`` makes ``import name`` fail), so it
holds whether or not they are installed here.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

FRAMEWORKS = ("tensorflow", "torch", "jax")


def run_without_frameworks(code: str) -> str:
    preamble = "import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in FRAMEWORKS)
    result = subprocess.run(
        [sys.executable, "-c", preamble + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_import_resound_imports_no_framework() -> None:
    # In a plain interpreter (frameworks importable if installed), nothing loads them.
    code = (
        "import sys, resound, resound.datasets\n"
        f"print(sorted(name for name in {FRAMEWORKS!r} if name in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_sample_info_tf_dtypes_names_the_missing_package() -> None:
    printed = run_without_frameworks(
        """
        import resound
        for method in (resound.SampleInfo.tf_dtypes, resound.SampleInfo.tf_shapes):
            try:
                method()
            except ImportError as error:
                print(error)
        print(resound.SampleInfo.zeros())
        """
    )
    lines = printed.splitlines()
    assert lines[0] == (
        "SampleInfo.tf_dtypes needs tensorflow, which is not installed: pip install tensorflow"
    )
    assert lines[1].startswith("SampleInfo.tf_shapes needs tensorflow")
    assert lines[2].startswith("SampleInfo(key=0,")
