#!/usr/bin/env bash
# Runs the interop tests in tests/interop/ (which the default pytest run never
# collects: norecursedirs in pyproject.toml) beside TensorFlow, PyTorch and JAX.
#
#   bash tools/check_frameworks.sh
#
# Three virtualenvs, because TensorFlow 2.15 and a current JAX cannot share
# one: tensorflow-cpu 2.15 pins numpy<2 and ml-dtypes~=0.2.0, while current
# jax and jaxlib need numpy>=2 and ml-dtypes>=0.5.
#   .venv-frameworks-tf          numpy 1.26 + tensorflow-cpu 2.15 + torch (the numpy 1.x check)
#   .venv-frameworks-jax         numpy 2.x  + jax (CPU)          + torch
#   .venv-frameworks-tf-current  numpy 2.x  + the newest tensorflow-cpu
# The first runs the TensorFlow and PyTorch tests
# (tests/interop/test_<framework>_*.py) on numpy 1.26; the second the JAX
# and PyTorch tests on numpy 2; the third the TensorFlow tests on the newest
# TensorFlow. The whole suite runs on numpy 2 (the README's command) and on
# numpy 1.x (tools/check_pythons.sh, on Python 3.10). TensorFlow 2.15
# has wheels up to Python 3.11 only, so every venv uses Python 3.11
# (FRAMEWORKS_PYTHON overrides the interpreter).
#
# torch is pinned to the CPU build 2.13.0+cpu, whose wheel lies on this kind of
# machine's disk (pip's find-links); a plain `torch` would make pip download a
# CUDA build of several GB.
#
# resound is built once per run, as a wheel of this checkout (the extension
# does not depend on numpy's version), in its own CMake build dir
# (build/frameworks) so that re-runs rebuild only what changed; both venvs
# install that wheel with its [test] extra. The venvs are kept between runs;
# delete them to start afresh.
set -euo pipefail
cd "$(dirname "$0")/.."

python="${FRAMEWORKS_PYTHON:-}"
if [ -z "$python" ]; then
  for candidate in /root/.pyenv/versions/3.11.7/bin/python3 python3.11; do
    if command -v "$candidate" > /dev/null; then
      python="$(command -v "$candidate")"
      break
    fi
  done
fi
if [ -z "$python" ] || ! "$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
  echo "check_frameworks.sh needs Python 3.11 (set FRAMEWORKS_PYTHON); found: ${python:-none}" >&2
  exit 1
fi

torch_requirement="torch==2.13.0+cpu"
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-1}"  # no INFO lines from TensorFlow's C++
tf_venv=.venv-frameworks-tf
jax_venv=.venv-frameworks-jax
tf_current_venv=.venv-frameworks-tf-current
wheelhouse=build/frameworks-wheel

# pip VENV ARGS...: quiet pip, without the notes about this machine's empty
# extra index folders (pip's exit status is kept by pipefail).
pip() {
  local venv="$1"
  shift
  "$venv/bin/python" -m pip --quiet "$@" 2>&1 \
    | { grep -v "is ignored: it is neither a file nor a directory" || true; }
}

new_venv() {
  [ -x "$1/bin/python" ] || "$python" -m venv "$1"
  pip "$1" install --upgrade pip
}

# run_tests VENV TEST_PATH...: prints the versions, then runs pytest.
run_tests() {
  local venv="$1"
  shift
  "$venv/bin/python" - << 'EOF'
import importlib, sys
print("Python", sys.version.split()[0])
for name in ("numpy", "ml_dtypes", "tensorflow", "torch", "jax", "jaxlib", "resound"):
    try:
        module = importlib.import_module(name)
    except ImportError:
        continue
    print(f"{name} {getattr(module, '__version__', '?')}")
    if name == "torch" and module.version.cuda is not None:
        sys.exit(f"torch is a CUDA build ({module.version.cuda}); expected the CPU build")
EOF
  "$venv/bin/python" -m pytest -q -p no:cacheprovider "$@"
}

echo "== build resound"
new_venv "$tf_venv"
pip "$tf_venv" install "scikit-build-core>=0.10" "pybind11>=2.12" cmake ninja
rm -rf "$wheelhouse"
pip "$tf_venv" wheel --no-deps --no-build-isolation -C build-dir=build/frameworks \
  -w "$wheelhouse" .
wheel=$(echo "$wheelhouse"/resound_rl-*.whl)  # the distribution resound-rl

echo "== numpy 1.26, TensorFlow 2.15, PyTorch"
pip "$tf_venv" install --force-reinstall --no-deps "$wheel"
pip "$tf_venv" install "numpy<2" "tensorflow-cpu~=2.15.0" "$torch_requirement" "$wheel[test]"
run_tests "$tf_venv" tests/interop/test_tensorflow_*.py tests/interop/test_torch_*.py

echo "== numpy 2.x, JAX, PyTorch"
new_venv "$jax_venv"
pip "$jax_venv" install --force-reinstall --no-deps "$wheel"
pip "$jax_venv" install "numpy>=2" "jax[cpu]" "$torch_requirement" "$wheel[test]"
run_tests "$jax_venv" tests/interop/test_jax_*.py tests/interop/test_torch_*.py

echo "== numpy 2.x, the newest TensorFlow"
new_venv "$tf_current_venv"
pip "$tf_current_venv" install --force-reinstall --no-deps "$wheel"
pip "$tf_current_venv" install "numpy>=2" tensorflow-cpu "$wheel[test]"
run_tests "$tf_current_venv" tests/interop/test_tensorflow_*.py
