#!/usr/bin/env bash
# Type checks of the package, run by .ci/run:
#   1. mypy over python/resound, configured in pyproject.toml ([tool.mypy]);
#   2. stubtest: python/resound/_core.pyi against the built resound._core, with
#      the pybind11 artifacts a stub cannot express in tools/stubtest-allowlist.txt.
#
#   bash tools/check_types.sh                            # with python3 on PATH
#   PYTHON=/path/to/venv/bin/python bash tools/check_types.sh
#
# Installs nothing: the interpreter must have mypy (the test extra has it) and
# import resound._core (an installed or editable build of this tree's C++).
# The stubs are read from this tree (MYPYPATH=python), the runtime module from
# wherever the interpreter imports it. Exits non-zero if either check fails.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"

echo "== mypy (python/resound)"
"$python" -m mypy

echo "== stubtest (resound._core against python/resound/_core.pyi)"
MYPYPATH=python "$python" -m mypy.stubtest resound._core \
  --mypy-config-file pyproject.toml --allowlist tools/stubtest-allowlist.txt
