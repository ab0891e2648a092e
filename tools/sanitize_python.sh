#!/usr/bin/env bash
# Builds resound._core with a sanitizer and runs the Python tests that drive
# the core from many threads against it.
#   bash tools/sanitize_python.sh thread    # ThreadSanitizer
#   bash tools/sanitize_python.sh address   # AddressSanitizer + UBSan
# The interpreter itself is not instrumented, so the sanitizer runtime is
# preloaded; reports come only from resound's own (instrumented) code.
set -euo pipefail
cd "$(dirname "$0")/.."
kind="${1:-thread}"
case "$kind" in
  thread) runtime=libtsan.so; tests=(tests/test_concurrency.py tests/test_rate_limiter.py)
          export TSAN_OPTIONS="halt_on_error=1 report_signal_unsafe=0" ;;
  address) runtime=libasan.so; tests=(tests)
           export ASAN_OPTIONS="detect_leaks=0" UBSAN_OPTIONS="halt_on_error=1 print_stacktrace=1" ;;
  *) echo "usage: $0 thread|address" >&2; exit 2 ;;
esac

build="build/py-$kind"
python3 -m pip install --quiet "pybind11>=2.12" cmake ninja
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRESOUND_SANITIZE="$kind" \
  -DRESOUND_BUILD_PYTHON=ON -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" \
  -DPython_EXECUTABLE="$(command -v python3)" > /dev/null
cmake --build "$build" --target _core > /dev/null

stage="$build/stage"
rm -rf "$stage" && mkdir -p "$stage/resound"
cp python/resound/*.py "$stage/resound/"
cp "$build"/_core*.so "$stage/resound/"

preload="$(${CXX:-g++} -print-file-name=$runtime)"
echo "running ${tests[*]} against the $kind-sanitized extension"
LD_PRELOAD="$preload" PYTHONPATH="$stage" python3 -m pytest -q -p no:cacheprovider "${tests[@]}"
