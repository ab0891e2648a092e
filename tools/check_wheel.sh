#!/usr/bin/env bash
# The wheel as a user gets it: builds it with `pip wheel . --no-deps` (the
# build tree under build/ is reused, so a second run compiles only what
# changed), checks what it holds (tools/check_wheel_contents.py), installs it
# with the `test` extra into a fresh virtualenv, and runs the test suite
# there from a scratch directory: nothing of the source tree's python/ is on
# sys.path, and the run first shows that `import resound` finds the venv's
# copy (tests/system/test_packaging.py checks the same inside the suite).
#
#   bash tools/check_wheel.sh                       # with python3 on PATH
#   PYTHON=/path/to/python3.13 bash tools/check_wheel.sh
#   bash tools/check_wheel.sh -x -k packaging       # arguments go to pytest
#
# Needs network access (the build requirements, the test extra). Leaves
# nothing behind but build/; exits non-zero at the first step that fails.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
python="${PYTHON:-python3}"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

seconds() { echo "$(($(date +%s) - $1)) s"; }

echo "== build the wheel (pip wheel . --no-deps)"
start=$(date +%s)
"$python" -m pip wheel . --no-deps --quiet -w "$scratch/dist"
wheels=("$scratch"/dist/resound_rl-*.whl)
[ "${#wheels[@]}" -eq 1 ] || { echo "expected one wheel, got: ${wheels[*]}" >&2; exit 1; }
wheel="${wheels[0]}"
echo "built $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KB) in $(seconds "$start")"

echo "== what it holds"
"$python" tools/check_wheel_contents.py "$wheel"

echo "== install it with the test extra into a fresh virtualenv"
start=$(date +%s)
"$python" -m venv "$scratch/venv"
venv_python="$scratch/venv/bin/python"
"$venv_python" -m pip install --quiet --upgrade pip
"$venv_python" -m pip install --quiet "$wheel[test]"
echo "installed in $(seconds "$start")"

echo "== the tests, against the installed package"
mkdir "$scratch/run"
cd "$scratch/run"  # not the source tree: its python/ must not shadow the wheel
site_packages="$("$venv_python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
"$venv_python" - "$site_packages" <<'EOF'
import sys
from pathlib import Path

import resound

imported = Path(resound.__file__).resolve()
site_packages = Path(sys.argv[1]).resolve()
print(f"resound {resound.__version__} imported from {imported.parent}")
if site_packages not in imported.parents:
    sys.exit(f"resound was imported from {imported}, not from {site_packages}")
EOF
start=$(date +%s)
"$venv_python" -m pytest -q -p no:cacheprovider "$root/tests" "$@"
echo "tests ran in $(seconds "$start")"
