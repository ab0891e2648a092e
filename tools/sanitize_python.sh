#!/usr/bin/env bash
# Builds resound._core with a sanitizer and runs Python tests against it.
#   bash tools/sanitize_python.sh thread    # ThreadSanitizer: the multi-threaded tests
#   bash tools/sanitize_python.sh address   # AddressSanitizer + UBSan: every test
# The interpreter is not instrumented, so the sanitizer runtime is preloaded
# and reports come only from resound's own (instrumented) code. Some
# interpreters crash as soon as libtsan is preloaded (pyenv's builds do), so
# the interpreter is SANITIZE_PYTHON, by default the system's /usr/bin/python3
# when present; the script makes its own virtualenv from it.
set -euo pipefail
cd "$(dirname "$0")/.."
kind="${1:-thread}"
case "$kind" in
  thread)
    preset=tsan
    runtime=libtsan.so
    # The embedded runs of the parametrized tests only: under the TSan runtime
    # one of grpcio's (uninstrumented) event-engine threads now and then
    # spins allocating until the machine runs out of memory (3 runs in 40
    # here, none outside TSan). The gRPC runs go through the same core calls
    # from the servicer's threads, and run under ASan below and in the suite.
    # The same-host transport's runs start a gRPC server too (it finds the
    # socket through ServerInfo): left out for the same reason; its C++ runs
    # under TSan in ctest (local_transport_test).
    tests=(tests/core/test_concurrency.py tests/core/test_rate_limiter.py tests/core/test_table.py
           tests/api/test_trajectory_writer.py tests/api/test_api_server.py tests/api/test_api_client.py
           -k "not grpc and not local")
    # grpcio's C-core is not instrumented: races TSan sees through its
    # intercepted calls are ignored (reports from resound's code are kept),
    # and its fork handlers start threads in a forked child before exec.
    export TSAN_OPTIONS="halt_on_error=1 report_signal_unsafe=0 ignore_noninstrumented_modules=1 die_after_fork=0" ;;
  address)
    preset=asan
    runtime=libasan.so
    tests=(tests)
    export ASAN_OPTIONS="detect_leaks=0" UBSAN_OPTIONS="halt_on_error=1 print_stacktrace=1" ;;
  *) echo "usage: $0 thread|address" >&2; exit 2 ;;
esac

default_python=python3
[ -x /usr/bin/python3 ] && default_python=/usr/bin/python3
base_python="${SANITIZE_PYTHON:-$default_python}"
# The extension is built in the CMake preset's tree (build/asan, build/tsan),
# beside the C++ tests, so the instrumented core is compiled once for both.
build="build/$preset"
venv="build/py-$kind-venv"
if [ ! -x "$venv/bin/python" ]; then
  "$base_python" -m venv "$venv"
fi
python="$venv/bin/python"
"$python" -m pip install --quiet --upgrade pip
"$python" -m pip install --quiet "pybind11>=2.12" cmake ninja numpy lz4 grpcio grpcio-health-checking protobuf grpcio-tools prometheus_client "pytest>=9" hypothesis cryptography

cmake --preset "$preset" -DRESOUND_BUILD_PYTHON=ON \
  -Dpybind11_DIR="$("$python" -m pybind11 --cmakedir)" -DPython_EXECUTABLE="$python" > /dev/null
cmake --build --preset "$preset" --target _core > /dev/null

stage="$build/stage"
rm -rf "$stage" && mkdir -p "$stage/resound"
cp -r python/resound/. "$stage/resound/"
rm -f "$stage"/resound/_core*.so
cp "$build"/cpp/bindings/_core*.so "$stage/resound/"

# libstdc++ is preloaded too: the sanitizer must find the real __cxa_throw at
# start-up, before the extension pulls libstdc++ in.
preload="$(${CXX:-g++} -print-file-name=$runtime) $(${CXX:-g++} -print-file-name=libstdc++.so.6)"
echo "running ${tests[*]} against the $kind-sanitized extension ($("$python" --version))"
LD_PRELOAD="$preload" PYTHONPATH="$stage" "$python" -m pytest -q -p no:cacheprovider "${tests[@]}"
