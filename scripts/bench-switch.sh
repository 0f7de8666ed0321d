#!/usr/bin/env bash
# Switch benchmark (not a timed test): the full QoS pipeline of one switch
# on one engine thread, in real time, fed in-process, against dpdk-testpmd
# io forwarding in the same run. For 64 B and 4 KB frames it prints:
#   switch   - rocemu_switch_bench: two net_ring ethdevs (rte_eth_from_rings)
#              on a 2-port switch in `qos roce mode lossless`; a feeder node
#              in the same engine hands each transmitted RoCEv2 packet back
#              to the port's receive ring (TTL restored), so every packet
#              crosses parse, trust, PG accounting, LPM route + MAC/TTL
#              rewrite, shared-buffer admission, ECN, TC queue, scheduler
#              and transmit, with no allocation or copy;
#   forward  - the engine's plain Forwarder node on the same harness (the
#              engine and ring cost without the pipeline);
#   testpmd  - dpdk-testpmd --forward-mode=io on net_ring loopback vdevs
#              (--tx-first) and on net_null vdevs, the reference. io mode
#              touches no packet data: it moves mbuf pointers.
# Rates are forwarded packets per second (each packet counted once), the
# median of ROUNDS runs; "cpu" is the forwarding thread's share of its CPU
# (other processes share this machine), "per cpu-s" corrects for it.
# Everything runs on CPU $BENCH_CPU (EAL -l 0 pins the bench's engine
# thread to CPU 0; testpmd gets --lcores=0@CPU,1@CPU).
#
# Environment: BUILD_DIR (default build), ROUNDS (3), SECONDS_PER_RUN (3),
# FRAMES ("64 4096").
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
ROUNDS=${ROUNDS:-3}
SECS=${SECONDS_PER_RUN:-3}
FRAMES=${FRAMES:-"64 4096"}
CPU=0
BENCH=$BUILD_DIR/tests/bench/switch/rocemu_switch_bench

if [[ ! -f $BUILD_DIR/build.ninja ]]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja >/dev/null
fi
ninja -C "$BUILD_DIR" -j2 rocemu_switch_bench >/dev/null
command -v dpdk-testpmd >/dev/null || { echo "dpdk-testpmd not found (Debian package dpdk)" >&2; exit 1; }

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }
median() { sort -g | awk '{v[NR]=$1} END {if (NR == 0) print 0; else if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
med() { printf '%s\n' "$@" | median; }

TESTPMD_PID=
trap '[[ -n $TESTPMD_PID ]] && kill -INT "$TESTPMD_PID" 2>/dev/null; true' EXIT
# testpmd_run VDEV_KIND FRAME -> "PPS CPU_SHARE": median over the stats
# periods (the first, start-up, left out) of Rx-pps summed over both ports.
testpmd_run() {
  local kind=$1 frame=$2 log vdevs extra
  log=$(mktemp)
  local mbuf=$(( frame + 512 > 2176 ? frame + 512 : 2176 ))
  if [[ $kind == ring ]]; then
    vdevs=(--vdev net_ring0 --vdev net_ring1)
    extra=(--tx-first "--txpkts=$frame")
  else
    vdevs=(--vdev "net_null0,size=$frame" --vdev "net_null1,size=$frame")
    extra=()
  fi
  dpdk-testpmd --no-huge --no-pci --no-shconf -m 512 --lcores="0@$CPU,1@$CPU" --file-prefix="rocemu-swbench-$$" \
    --log-level='lib.*:error' --log-level='pmd.*:error' "${vdevs[@]}" -- \
    --forward-mode=io --stats-period 1 --nb-cores=1 --total-num-mbufs=16384 "--mbuf-size=$mbuf" "${extra[@]}" \
    >"$log" 2>&1 &
  TESTPMD_PID=$!
  for _ in $(seq 200); do grep -q 'Rx-pps' "$log" && break; sleep 0.1; done
  local tid="" r0=0 r1=0 w0=0 w1=1
  for f in /proc/"$TESTPMD_PID"/task/*/comm; do
    [[ $(cat "$f" 2>/dev/null) =~ ^(rte|lcore)-worker-1$ ]] && tid=$(basename "$(dirname "$f")")
  done
  [[ -n $tid ]] && { read -r r0 _ <"/proc/$TESTPMD_PID/task/$tid/schedstat"; w0=$(date +%s.%N); }
  sleep "$SECS"
  [[ -n $tid ]] && { read -r r1 _ <"/proc/$TESTPMD_PID/task/$tid/schedstat"; w1=$(date +%s.%N); }
  sleep 0.5
  kill -INT "$TESTPMD_PID" 2>/dev/null || true
  wait "$TESTPMD_PID" 2>/dev/null || true
  TESTPMD_PID=
  local pps share=1
  pps=$(grep -o 'Rx-pps: *[0-9]*' "$log" | awk '{print $2}' | paste - - | awk 'NR > 1 {print $1 + $2}' | median)
  [[ -n $tid ]] && share=$(awk -v a="$r0" -v b="$r1" -v s="$w0" -v e="$w1" 'BEGIN {printf "%.3f", (b - a) / 1e9 / (e - s)}')
  rm -f "$log"
  echo "$pps $share"
}

echo "== rocemu switch benchmark: $(date -u +%FT%TZ), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "   load average before: $(cut -d' ' -f1-3 /proc/loadavg) (other processes may share the CPUs; compare within this run)"
echo "   ${ROUNDS} rounds x ${SECS} s per program, all on CPU $CPU"
echo
mpps() { awk -v v="$1" 'BEGIN {if (v > 0) printf "%8.2f Mpps %8.2f ns/pkt", v / 1e6, 1e9 / v; else printf "%8s Mpps %8s ns/pkt", "-", "-"}'; }
summary=()
for frame in $FRAMES; do
  sw=() swc=() swcpu=() fw=() tpr=() tpn=() tprc=() tpnc=() gbps=() drops=0 real_frame=$frame
  for round in $(seq 1 "$ROUNDS"); do
    r=$("$BENCH" switch --frame "$frame" --seconds "$SECS" 2>/dev/null | grep '^RESULT')
    sw+=("$(field pps "$r")") swc+=("$(field pps_per_cpu "$r")") swcpu+=("$(field cpu "$r")") gbps+=("$(field gbps "$r")")
    drops=$(( drops + $(field drops "$r") )) real_frame=$(field frame "$r")
    r=$("$BENCH" forward --frame "$frame" --seconds "$SECS" 2>/dev/null | grep '^RESULT')
    fw+=("$(field pps_per_cpu "$r")")
    read -r t c < <(testpmd_run ring "$frame")
    tpr+=("$t") tprc+=("$(awk -v t="$t" -v c="$c" 'BEGIN {printf "%.0f", (c > 0 ? t / c : t)}')")
    read -r t c < <(testpmd_run null "$frame")
    tpn+=("$t") tpnc+=("$(awk -v t="$t" -v c="$c" 'BEGIN {printf "%.0f", (c > 0 ? t / c : t)}')")
  done
  S=$(med "${sw[@]}") SC=$(med "${swc[@]}") F=$(med "${fw[@]}") TR=$(med "${tpr[@]}") TN=$(med "${tpn[@]}")
  TRC=$(med "${tprc[@]}") TNC=$(med "${tpnc[@]}")
  echo "frame ${frame} B (RoCEv2 frame of ${real_frame} B without FCS)"
  echo "   switch, full QoS pipeline     $(mpps "$S") per wall-s ($(med "${gbps[@]}") Gbit/s), $(mpps "$SC") per cpu-s, cpu $(med "${swcpu[@]}"), drops $drops"
  echo "   engine Forwarder, same rings  $(mpps "$F") per cpu-s"
  echo "   testpmd io, net_ring loopback $(mpps "$TR") per wall-s, $(mpps "$TRC") per cpu-s"
  echo "   testpmd io, net_null          $(mpps "$TN") per wall-s, $(mpps "$TNC") per cpu-s"
  rr=$(awk -v a="$SC" -v b="$TRC" 'BEGIN {printf "%.3f", a / b}')
  rn=$(awk -v a="$SC" -v b="$TNC" 'BEGIN {printf "%.3f", a / b}')
  rf=$(awk -v a="$SC" -v b="$F" 'BEGIN {printf "%.3f", a / b}')
  echo "   ratio switch/testpmd (per cpu-s): net_ring $rr, net_null $rn; switch/engine forwarder $rf"
  target=$([[ $frame -le 64 ]] && echo 10 || echo 3)
  verdict=$(awk -v v="$SC" -v t="$target" 'BEGIN {print (v / 1e6 >= t) ? "meets" : "misses"}')
  echo "   target ${target} Mpps per core: ${verdict}"
  summary+=("${frame}B: switch $(awk -v v="$SC" 'BEGIN {printf "%.2f", v / 1e6}') Mpps/core, testpmd net_null $(awk -v v="$TNC" 'BEGIN {printf "%.1f", v / 1e6}'), net_ring $(awk -v v="$TRC" 'BEGIN {printf "%.1f", v / 1e6}') (ratios $rn, $rr)")
  echo
done
echo "summary: ${summary[*]}"
echo "   load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
