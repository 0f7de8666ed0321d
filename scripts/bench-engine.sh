#!/usr/bin/env bash
# Engine benchmark (not a timed test). Prints:
#  (a) packets per wall-second the engine moves over internal links in
#      virtual time (generator -> forwarder -> forwarder -> sink at 100G),
#      64 B and 1500 B frames: pkts/s, ns/pkt and simulated/wall time;
#  (b) real-time forwarding by one engine thread (a Forwarder node between
#      two net_null vdevs) against dpdk-testpmd io forwarding on the same
#      vdevs, both on the same single CPU, run one after the other in
#      alternating rounds; the ratio engine/testpmd (target >= 0.8);
#  (c) the CPU an idle real-time engine uses over 2 s, with internal links
#      only and with two idle external ports.
# The machine may be loaded by other work: the ratio of (b) is measured
# round by round, and each program's CPU share is printed next to it.
#
# Environment: BUILD_DIR (default build), ROUNDS (3), SECONDS_PER_RUN (3),
# BENCH_CPU (CPU both forwarders run on, default 0), FRAME (net_null frame
# length, 64).
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
ROUNDS=${ROUNDS:-3}
SECS=${SECONDS_PER_RUN:-3}
CPU=${BENCH_CPU:-0}
FRAME=${FRAME:-64}
BENCH=$BUILD_DIR/tests/bench/engine/rocemu_engine_bench

if [[ ! -f $BUILD_DIR/build.ninja ]]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja >/dev/null
fi
ninja -C "$BUILD_DIR" -j2 rocemu_engine_bench >/dev/null
command -v dpdk-testpmd >/dev/null || { echo "dpdk-testpmd not found (Debian package dpdk)" >&2; exit 1; }

field() {  # field KEY "RESULT ... KEY=VALUE ..."
  sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"
}
median() { sort -g | awk '{v[NR]=$1} END {if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

echo "== rocemu engine benchmark: $(date -u +%FT%TZ), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "   load average before: $(cut -d' ' -f1-3 /proc/loadavg)  (other processes may share the CPUs; compare within this run)"
echo

echo "(a) virtual time, internal links: gen -> fw -> fw -> sink, 100 Gbit/s links, 1 us delay"
printf "    %-6s %12s %10s %14s %11s %14s\n" frame pkts/s ns/pkt hop-pkts/s ns/hop sim/wall
for frame in 64 1500; do
  r=$("$BENCH" virtual --frame "$frame" --packets 2000000 2>/dev/null | grep '^RESULT')
  printf "    %-6s %12.0f %10.1f %14.0f %11.1f %14.4f\n" "$frame" "$(field pps "$r")" "$(field ns_per_pkt "$r")" \
    "$(field hop_pps "$r")" "$(field ns_per_hop "$r")" "$(field sim_over_wall "$r")"
done
echo "    (pkts/s: frames delivered end to end per wall-second; each crosses 3 links: hop-pkts/s."
echo "     sim/wall: simulated seconds per wall second; 100 Gbit/s of 64 B frames is 142 Mpps.)"
echo

echo "(b) real-time forwarding between two net_null vdevs ($FRAME B), one thread on CPU $CPU, ${SECS} s per run"
TESTPMD_PID=
trap '[[ -n $TESTPMD_PID ]] && kill -INT "$TESTPMD_PID" 2>/dev/null; true' EXIT
# Runs testpmd (io forwarding, one forwarding lcore; its main lcore, which
# only prints statistics, shares the same CPU) and prints "PPS CPU_SHARE":
# the median over the stats periods of Tx-pps summed over both ports, and
# the forwarding thread's share of the CPU over the measured window.
testpmd_run() {
  local log
  log=$(mktemp)
  dpdk-testpmd --no-huge --no-pci --no-shconf -m 512 --lcores="0@$CPU,1@$CPU" --file-prefix="rocemu-bench-$$" \
    --log-level='lib.*:error' --log-level='pmd.*:error' \
    --vdev "net_null0,size=$FRAME" --vdev "net_null1,size=$FRAME" -- \
    --forward-mode=io --auto-start --stats-period 1 --nb-cores=1 --total-num-mbufs=16384 >"$log" 2>&1 &
  TESTPMD_PID=$!
  # Wait (20 s at most) for forwarding to run: the first stats period.
  for _ in $(seq 200); do grep -q 'Tx-pps' "$log" && break; sleep 0.1; done
  local tid="" r0 r1 w0 w1
  for f in /proc/"$TESTPMD_PID"/task/*/comm; do
    [[ $(cat "$f" 2>/dev/null) =~ ^(rte|lcore)-worker-1$ ]] && tid=$(basename "$(dirname "$f")")
  done
  if [[ -n $tid ]]; then
    read -r r0 _ <"/proc/$TESTPMD_PID/task/$tid/schedstat"
    w0=$(date +%s.%N)
  fi
  sleep "$SECS"
  if [[ -n $tid ]]; then
    read -r r1 _ <"/proc/$TESTPMD_PID/task/$tid/schedstat"
    w1=$(date +%s.%N)
  fi
  sleep 0.5
  kill -INT "$TESTPMD_PID" 2>/dev/null || true
  wait "$TESTPMD_PID" 2>/dev/null || true
  TESTPMD_PID=
  local pps share=1
  # Each period prints Tx-pps for port 0 then port 1; the first period
  # includes start-up, so it is left out.
  pps=$(grep -o 'Tx-pps: *[0-9]*' "$log" | awk '{print $2}' | paste - - | awk 'NR > 1 {print $1 + $2}' | median)
  [[ -n $tid ]] && share=$(awk -v a="$r0" -v b="$r1" -v s="$w0" -v e="$w1" 'BEGIN {printf "%.3f", (b - a) / 1e9 / (e - s)}')
  rm -f "$log"
  echo "$pps $share"
}
printf "    %-6s %12s %6s %12s   %12s %6s %12s   %6s %6s\n" round engine-pps cpu engine/cpu testpmd-pps cpu testpmd/cpu ratio ratio/cpu
ratios=() cratios=() engine_all=() testpmd_all=() engine_c=() testpmd_c=()
for round in $(seq 1 "$ROUNDS"); do
  r=$("$BENCH" --cpu "$CPU" forward --seconds "$SECS" --frame "$FRAME" 2>/dev/null | grep '^RESULT')
  e=$(field pps "$r") ecpu=$(field cpu "$r") ec=$(field pps_per_cpu "$r")
  read -r t tcpu < <(testpmd_run)
  [[ -n $t ]] || { echo "    testpmd printed no rates" >&2; exit 1; }
  tc=$(awk -v t="$t" -v c="$tcpu" 'BEGIN {printf "%.0f", t / c}')
  ratio=$(awk -v e="$e" -v t="$t" 'BEGIN {printf "%.3f", e / t}')
  cratio=$(awk -v e="$ec" -v t="$tc" 'BEGIN {printf "%.3f", e / t}')
  printf "    %-6s %12.0f %6.2f %12.0f   %12.0f %6.2f %12.0f   %6s %6s\n" "$round" "$e" "$ecpu" "$ec" "$t" "$tcpu" "$tc" "$ratio" "$cratio"
  ratios+=("$ratio") cratios+=("$cratio") engine_all+=("$e") testpmd_all+=("$t") engine_c+=("$ec") testpmd_c+=("$tc")
done
mpps() { awk -v v="$1" 'BEGIN {printf "%.2f Mpps (%.2f ns/pkt)", v / 1e6, 1e9 / v}'; }
med() { printf '%s\n' "$@" | median; }
echo "    median per wall-second: engine $(mpps "$(med "${engine_all[@]}")"), testpmd $(mpps "$(med "${testpmd_all[@]}")"), ratio $(med "${ratios[@]}")"
echo "    median per CPU-second:  engine $(mpps "$(med "${engine_c[@]}")"), testpmd $(mpps "$(med "${testpmd_c[@]}")"), ratio $(med "${cratios[@]}")"
echo "    (target: ratio >= 0.8. cpu: the forwarding thread's share of its CPU while measured; below 1"
echo "     means other processes took the CPU, which the per-CPU-second rates and ratio correct for.)"
echo

echo "(c) idle real-time engine, CPU of the whole process over 2 s"
for ports in "" "--ports"; do
  r=$("$BENCH" idle --seconds 2 $ports 2>/dev/null | grep '^RESULT')
  printf "    %-40s cpu %5.2f %% of a core (/proc/self/stat: %s %%), %s sleeps\n" \
    "$([[ -n $ports ]] && echo "2 idle external ports (net_ring)" || echo "internal links only, no ports")" \
    "$(field cpu_pct "$r")" "$(field stat_cpu_pct "$r")" "$(field sleeps "$r")"
done
echo "    load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
