#!/usr/bin/env bash
# Installs and builds if needed, then runs the whole test suite:
#   1. the CMake build with -Werror, every CTest group (unit, protocol, sim,
#      oracle, fuzz, e2e);
#   2. the meson build of the same libraries and programs, with clang and
#      ASan+UBSan, running the unit, protocol, sim and oracle groups and
#      short libFuzzer runs (the decoders, the control protocol);
#   3. the meson build again with ThreadSanitizer, running the unit,
#      protocol and sim groups and then the ethdev e2e group and the
#      robustness and verification e2e tests (alone: they run in real
#      time).
# Steps 2 and 3 build in the background during step 1's tests, and step
# 2's tests run there too, beside step 3's build, at the lowest priority.
#   scripts/test.sh [--quick]   (--quick: step 1 only)
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
[ "${1:-}" = "--quick" ] && quick=1

start=$(date +%s)
scripts/setup.sh --werror

# The sanitizer builds exist for their tests: line tables are enough for
# their reports and compile about a fifth faster than full -g.
line_tables="-Dcpp_args=-gline-tables-only"

# Both sanitizer builds (steps 2 and 3) are independent of step 1's tests:
# they build meanwhile, one after the other, at the lowest priority, in the
# CPU the real-time e2e tests leave idle. Each builds only what its tests
# run (scripts/test-targets.py): no benchmark programs, and no e2e programs
# in the ASan build, whose e2e tests are not run.
# Unity builds, as the CMake one (scripts/setup.sh): 8 files of a target
# per translation unit, well under half the CPU time of a per-file build.
setup_meson() {  # DIR SANITIZERS EXTRA...
  local dir=$1 san=$2
  shift 2
  if [ ! -f "$dir/build.ninja" ]; then
    rm -rf "$dir"
    CC=clang CXX=clang++ meson setup "$dir" --buildtype=debug -Dwerror=true \
      -Db_sanitize="$san" -Db_lundef=false $line_tables -Dunity=on -Dunity_size=8 "$@" >/dev/null
  else
    meson configure "$dir" -Dunity=on -Dunity_size=8 >/dev/null
  fi
}
sanitizer_builds_pid=
if [ "$quick" = 0 ]; then
  setup_meson build-meson-asan address,undefined -Dfuzz=true
  setup_meson build-meson-tsan thread
  asan_targets=$(scripts/test-targets.py build-meson-asan --skip tests/e2e)
  tsan_targets=$(scripts/test-targets.py build-meson-tsan)
  rm -f build-meson-asan/test.rc build-meson-asan/test.log
  (
    # shellcheck disable=SC2086 # one target per word
    nice -n 19 ninja -C build-meson-asan $asan_targets >build-meson-asan/build.log 2>&1 || exit 1
    # The ASan+UBSan tests need nothing more: they run (as low) beside the
    # TSan build, their output kept for the end.
    (
      rc=0
      ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        nice -n 19 meson test -C build-meson-asan --no-rebuild --print-errorlogs --num-processes 1 \
        --suite unit --suite protocol --suite sim --suite oracle --suite fuzz >build-meson-asan/test.log 2>&1 ||
        rc=$?
      echo "$rc" >build-meson-asan/test.rc
    ) &
    # shellcheck disable=SC2086
    nice -n 19 ninja -C build-meson-tsan -j2 $tsan_targets >build-meson-tsan/build.log 2>&1 || { wait; exit 2; }
    wait
  ) &
  sanitizer_builds_pid=$!
  # A step that fails (set -e) leaves nothing running behind the script.
  kill_tree() {  # PID and its descendants: each stopped before its children are listed
    local c children
    kill -STOP "$1" 2>/dev/null || return 0
    children=$(pgrep -P "$1" || true)
    kill "$1" 2>/dev/null || true
    for c in $children; do kill_tree "$c"; done
    kill -CONT "$1" 2>/dev/null || true
  }
  trap '[ -n "$sanitizer_builds_pid" ] && kill_tree "$sanitizer_builds_pid"; true' EXIT
fi

echo "== tests (CMake build)"
(cd build && ctest --output-on-failure -j2 --timeout 600)

if [ "$quick" = 1 ]; then exit 0; fi

echo "== meson builds (clang; ASan+UBSan with libFuzzer, ThreadSanitizer) [$(( $(date +%s) - start )) s]"
# The second build is both the meson build and the sanitizer build: the same
# libraries, programs and tests (tests/common/build_drift.py keeps the two
# build descriptions equal), compiled by another compiler with ASan+UBSan.
# The third is the same again with ThreadSanitizer: the engine thread and
# the control thread share the NIC only through on_engine()
# (nic/verbs/server.h says who owns what); TSan checks that over the unit,
# protocol, sim and e2e groups. The e2e group preloads the CMake build's
# provider: an uninstrumented perftest cannot load a TSan one.
status=0
wait "$sanitizer_builds_pid" || status=$?
sanitizer_builds_pid=
case "$status" in
  0) ;;
  1) tail -n 100 build-meson-asan/build.log; exit 1 ;;
  *)
    tail -n 100 build-meson-tsan/build.log
    echo "== (the ASan+UBSan tests, beside the failed TSan build)"
    cat build-meson-asan/test.log 2>/dev/null || true
    exit 1
    ;;
esac
tsan_start=$(date +%s)
tsan_options="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp"

echo "== sanitizer tests: ASan+UBSan (run beside the TSan build) [$(( $(date +%s) - start )) s]"
cat build-meson-asan/test.log
# A failure here is reported at the end: the TSan steps run all the same.
asan_status=0
if [ "$(cat build-meson-asan/test.rc 2>/dev/null)" != 0 ]; then
  echo "== ASan+UBSan tests FAILED (exit $(cat build-meson-asan/test.rc 2>/dev/null || echo '?')); the TSan steps run all the same"
  asan_status=1
fi
echo "== sanitizer tests: TSan [$(( $(date +%s) - start )) s]"
TSAN_OPTIONS=$tsan_options \
  meson test -C build-meson-tsan --no-rebuild --print-errorlogs --num-processes 2 \
  --suite unit --suite protocol --suite sim
echo "== TSan e2e [$(( $(date +%s) - start )) s]"
# Of the perftest-driven group, the tests where the control thread and the
# engine thread meet the most: applications and engines that die, hostile
# clients, every byte checked (45 s here; all of it would take 500 s).
# The engines are daemons: their stderr goes to a rocemu.log that the test
# removes. Every TSan report, theirs too, is written under tsan-reports/
# instead, and any report there fails the step.
tsan_reports=$PWD/build-meson-tsan/tsan-reports
rm -rf "$tsan_reports"
mkdir -p "$tsan_reports"
tsan_e2e_options="$tsan_options:log_path=$tsan_reports/tsan"
status=0
TSAN_OPTIONS=$tsan_e2e_options \
  meson test -C build-meson-tsan --no-rebuild --print-errorlogs --num-processes 1 rocemu_ethdev_tests-e2e || status=1
ROCEMU_PROVIDER="$PWD/build/lib/librocemu-verbs.so" TSAN_OPTIONS=$tsan_e2e_options \
  build-meson-tsan/tests/e2e/rocemu_e2e_tests "[robustness],[verify]" || status=1
if [ -n "$(ls -A "$tsan_reports")" ]; then
  echo "ThreadSanitizer reports (engines included):"
  cat "$tsan_reports"/*
  status=1
fi
[ "$status" = 0 ]
echo "== TSan tests took $(( $(date +%s) - tsan_start )) s"
if [ "$asan_status" != 0 ]; then
  echo "== the ASan+UBSan tests failed (their output is above)"
  exit 1
fi

echo "== all tests passed in $(( $(date +%s) - start )) s"
