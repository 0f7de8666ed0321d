#!/usr/bin/env bash
# Installs and builds if needed, then runs the whole test suite:
#   1. the CMake build with -Werror, every CTest group (unit, protocol, sim,
#      oracle, fuzz, e2e);
#   2. the meson build of the same libraries and programs, and its unit,
#      protocol and sim tests (a few seconds);
#   3. an ASan+UBSan build (clang) running the unit, protocol and sim groups
#      and a short libFuzzer run of the decoders.
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

echo "== meson build"
if [ ! -f build-meson/build.ninja ]; then meson setup build-meson --buildtype=debugoptimized -Dwerror=true >/dev/null; fi
ninja -C build-meson
meson test -C build-meson --no-rebuild --print-errorlogs --num-processes 2 --suite unit --suite protocol --suite sim

echo "== sanitizer build (clang, ASan+UBSan) and fuzzing"
CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DROCEMU_SANITIZE=ON \
  -DROCEMU_FUZZ=ON -DROCEMU_WERROR=ON >/dev/null
ninja -C build-asan
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --output-on-failure -j2 --timeout 600 -L 'unit|protocol|sim|fuzz')

echo "== all tests passed in $(( $(date +%s) - start )) s"
