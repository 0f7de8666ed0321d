#!/usr/bin/env bash
# Benchmarks of the verbs provider, through the built-in fabric (h1 -- sw1
# -- h2, real time), each against a baseline measured in the same run:
#  1. ib_write_bw -s 65536: Gbit/s, and the ratio to the copy limit (each
#     payload byte is copied twice by the engine, so the limit is half of
#     one core's process_vm_writev rate for 64 KiB blocks; target >= 0.7);
#     ib_read_bw -s 65536 next to it;
#  2. ib_send_lat -e and ib_write_lat typical latency, next to
#     `perf bench sched pipe` (a cross-process wake-up);
#  3. the idle engine's CPU use;
#  0. first, MRs the engine maps (one memcpy per byte) against the fallback
#     (ROCEMU_DMA=process_vm: process_vm_readv/writev, as before) and, with
#     BASELINE=<another build dir>, against that build's engine and
#     provider, rounds interleaved.
#   [BASELINE=/work/main/build] scripts/bench-provider.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
[ -x build/bin/rocemu ] || scripts/setup.sh
ninja -C build rocemu rocemu-verbs rocemu_vmcopy_bench >/dev/null
R=$PWD/build/bin/rocemu
export ROCEMU_RUNTIME_DIR=$(mktemp -d /tmp/rocemu-bench-XXXXXX)
cleanup() { "$R" down >/dev/null 2>&1 || true; rm -rf "$ROCEMU_RUNTIME_DIR"; }
trap cleanup EXIT
"$R" up --daemon >/dev/null
ENGINE=$(cat "$ROCEMU_RUNTIME_DIR/rocemu.pid")

# Runs a perftest pair (server h2, client h1) with the rocemu of $RX (default
# $R) and the environment in $PAIR_ENV; prints the client's result row.
pair() {
  local tool=$1; shift
  local r=${RX:-$R}
  local port=$((20000 + RANDOM % 20000))
  env $PAIR_ENV "$r" exec h2 -- "$tool" -d rocemu0 -p $port "$@" >/tmp/rocemu-bench-server.$$ 2>&1 &
  local spid=$!
  for _ in $(seq 1 200); do
    grep -q ":$(printf '%04X' $port) .* 0A" /proc/net/tcp /proc/net/tcp6 2>/dev/null && break
    sleep 0.02
  done
  env $PAIR_ENV "$r" exec h1 -- "$tool" -d rocemu0 -p $port "$@" 127.0.0.1 2>&1 | grep -E '^ +[0-9]+ +[0-9]+ ' | tail -1
  wait $spid || true
}
PAIR_ENV=
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "== 0. ib_write_bw / ib_read_bw -s 65536: mapped MRs vs process_vm_readv/writev${BASELINE:+ vs $BASELINE} ($ROUNDS rounds)"
uptime
BASE_DIR=
if [ -n "${BASELINE:-}" ]; then
  BASE_DIR=$(mktemp -d /tmp/rocemu-bench-base-XXXXXX)
  ROCEMU_RUNTIME_DIR=$BASE_DIR "$BASELINE/bin/rocemu" up --daemon >/dev/null
  trap 'cleanup; ROCEMU_RUNTIME_DIR=$BASE_DIR "$BASELINE/bin/rocemu" down >/dev/null 2>&1 || true; rm -rf "$BASE_DIR"' EXIT
fi
for tool in ib_write_bw ib_read_bw; do
  m=(); f=(); b=()
  for i in $(seq 1 "$ROUNDS"); do
    m+=("$(PAIR_ENV= pair $tool -s 65536 -n 20000 --report_gbits | awk '{print $4}')")
    f+=("$(PAIR_ENV=ROCEMU_DMA=process_vm pair $tool -s 65536 -n 20000 --report_gbits | awk '{print $4}')")
    line=$(printf "   round %d: %-11s mapped %6.2f   fallback %6.2f" "$i" "$tool" "${m[-1]}" "${f[-1]}")
    if [ -n "$BASE_DIR" ]; then
      b+=("$(PAIR_ENV=ROCEMU_RUNTIME_DIR=$BASE_DIR RX=$BASELINE/bin/rocemu pair $tool -s 65536 -n 20000 --report_gbits |
             awk '{print $4}')")
      line+=$(printf "   baseline %6.2f" "${b[-1]}")
    fi
    echo "$line Gbit/s"
  done
  M=$(printf "%s\n" "${m[@]}" | median); F=$(printf "%s\n" "${f[@]}" | median)
  printf "   median %s: mapped %.2f, fallback %.2f Gbit/s, ratio %.2f" "$tool" "$M" "$F" \
    "$(awk -v a="$M" -v b="$F" 'BEGIN {print a / b}')"
  if [ -n "$BASE_DIR" ]; then
    B=$(printf "%s\n" "${b[@]}" | median)
    printf "; baseline %.2f, ratio %.2f" "$B" "$(awk -v a="$M" -v b="$B" 'BEGIN {print a / b}')"
  fi
  echo
done
uptime

echo "== 1. ib_write_bw -s 65536 through h1 -- sw1 -- h2 ($ROUNDS rounds)"
bw=(); lim=()
for i in $(seq 1 "$ROUNDS"); do
  copy=$(build/tests/bench/provider/rocemu_vmcopy_bench 1)
  row=$(pair ib_write_bw -s 65536 -n 20000 --report_gbits)
  g=$(echo "$row" | awk '{print $4}')
  bw+=("$g"); lim+=("$(awk -v c="$copy" 'BEGIN {printf "%.3f", c * 8 / 2}')")
  printf "   round %d: ib_write_bw %6.2f Gbit/s   process_vm_writev %5.2f GB/s -> copy limit %6.2f Gbit/s\n" \
    "$i" "$g" "$copy" "${lim[-1]}"
done
BW=$(printf "%s\n" "${bw[@]}" | median); LIM=$(printf "%s\n" "${lim[@]}" | median)
printf "   median: %.2f Gbit/s = %.2f GB/s; copy limit %.2f Gbit/s; ratio %.2f (target >= 0.70)\n" \
  "$BW" "$(awk -v b="$BW" 'BEGIN {print b / 8}')" "$LIM" "$(awk -v b="$BW" -v l="$LIM" 'BEGIN {print b / l}')"

echo "== 1b. ib_read_bw -s 65536, the same path the other way (responder reads, requester writes)"
rb=()
for i in $(seq 1 "$ROUNDS"); do
  row=$(pair ib_read_bw -s 65536 -n 20000 --report_gbits)
  rb+=("$(echo "$row" | awk '{print $4}')")
  printf "   round %d: ib_read_bw %6.2f Gbit/s\n" "$i" "${rb[-1]}"
done
RB=$(printf "%s\n" "${rb[@]}" | median)
printf "   median: %.2f Gbit/s; ratio to the copy limit above %.2f\n" "$RB" "$(awk -v b="$RB" -v l="$LIM" 'BEGIN {print b / l}')"

echo "== 2. latency (typical, usec) against a cross-process wake-up"
pipe=$(perf bench sched pipe -l 100000 2>/dev/null | awk '/usecs\/op/ {print $1}')
[ -n "$pipe" ] || pipe="n/a"
for i in $(seq 1 "$ROUNDS"); do
  el=$(pair ib_send_lat -e -n 2000 | awk '{print $5}')
  wl=$(pair ib_write_lat -n 2000 | awk '{print $5}')
  printf "   round %d: ib_send_lat -e %8s   ib_write_lat %8s\n" "$i" "$el" "$wl"
done
printf "   perf bench sched pipe: %s usec per round trip (two wake-ups)\n" "$pipe"

echo "== 3. idle engine CPU (no application, 3 s)"
a=$(awk '{print $14 + $15}' /proc/$ENGINE/stat); sleep 3; b=$(awk '{print $14 + $15}' /proc/$ENGINE/stat)
hz=$(getconf CLK_TCK)
printf "   %.2f %% of one core\n" "$(awk -v d=$((b - a)) -v hz="$hz" 'BEGIN {print d / hz / 3 * 100}')"
