#!/usr/bin/env bash
# Installs and builds if needed, then runs the whole test suite:
#   1. the CMake build with -Werror, every CTest group (unit, protocol, sim,
#      oracle, fuzz, e2e);
#   2. the meson build of the same libraries and programs, with clang and
#      ASan+UBSan, running the unit, protocol, sim and oracle groups and a
#      short libFuzzer run of the decoders.
#   scripts/test.sh [--quick]   (--quick: step 1 only)
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
[ "${1:-}" = "--quick" ] && quick=1

start=$(date +%s)
scripts/setup.sh --werror

echo "== tests (CMake build)"
(cd build && ctest --output-on-failure -j2 --timeout 600)

if [ "$quick" = 1 ]; then exit 0; fi

echo "== meson build (clang, ASan+UBSan, libFuzzer) and its tests"
# The second build is both the meson build and the sanitizer build: the same
# libraries, programs and tests (tests/common/build_drift.py keeps the two
# build descriptions equal), compiled by another compiler with ASan+UBSan.
if [ ! -f build-meson-asan/build.ninja ]; then
  rm -rf build-meson-asan
  CC=clang CXX=clang++ meson setup build-meson-asan --buildtype=debug -Dwerror=true \
    -Db_sanitize=address,undefined -Db_lundef=false -Dfuzz=true >/dev/null
fi
ninja -C build-meson-asan
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  meson test -C build-meson-asan --no-rebuild --print-errorlogs --num-processes 2 \
  --suite unit --suite protocol --suite sim --suite oracle --suite fuzz

echo "== all tests passed in $(( $(date +%s) - start )) s"
