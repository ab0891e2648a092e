#!/usr/bin/env bash
# Runs the whole test suite on the oldest and the newest CPython the package
# supports that this machine has, beside the README's run on the default one:
#
#   bash tools/check_pythons.sh              # 3.10 (with numpy 1.x) and 3.13
#   CHECK_PYTHONS="3.12" bash tools/check_pythons.sh
#
# 3.10 runs with numpy < 2, so that the numpy 1.x line (what TensorFlow 2.15
# users have) is covered by the whole suite too. Each Python gets its own
# virtualenv (.venv-py3.X) and, through scikit-build-core's build/{wheel_tag},
# its own build folder, so re-runs recompile only what changed.
# An interpreter is looked for under pyenv's versions, then as pythonX.Y on
# PATH; one is taken only if it runs (pyenv's shims exist for versions that
# are installed but not selected, and refuse to run).
set -euo pipefail
cd "$(dirname "$0")/.."

find_python() {
  local version="$1"
  for candidate in "${PYENV_ROOT:-$HOME/.pyenv}/versions/$version"*/bin/python3 "python$version"; do
    if command -v "$candidate" > /dev/null 2>&1 && "$candidate" -c "" > /dev/null 2>&1; then
      command -v "$candidate"
      return 0
    fi
  done
  return 1
}

for version in ${CHECK_PYTHONS:-3.10 3.13}; do
  if ! python="$(find_python "$version")"; then
    echo "check_pythons.sh: no Python $version on this machine" >&2
    exit 1
  fi
  venv=".venv-py$version"
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  numpy="numpy"
  [ "$version" = "3.10" ] && numpy="numpy<2"
  echo "== Python $version ($("$venv/bin/python" --version)), $numpy"
  "$venv/bin/python" -m pip install --quiet ".[test]" "$numpy" 2>&1 \
    | { grep -v "is ignored: it is neither a file nor a directory" || true; }
  "$venv/bin/python" -c "import numpy, resound; print('numpy', numpy.__version__, '| resound', resound.__version__)"
  "$venv/bin/python" -m pytest -q -p no:cacheprovider
done
