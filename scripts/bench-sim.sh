#!/usr/bin/env bash
# How fast `rocemu sim` simulates: the HPCC-style N:1 incast (100 Gbit/s,
# 1 us links, 1000-byte payloads (messages of 1000 bytes, RoCE MTU 1024),
# ECN Kmin 400 KB, Kmax 1600 KB, Pmax 0.2, 32 MiB shared buffer, DCQCN
# with HPCC's parameters) run for 100 ms of virtual time with 8, 32 and
# 128 senders, and with 8 senders for 10, 100 and 1000 ms. Prints, per
# run, the wall time of the run and of the whole command, the data
# packets the bottleneck carried and
# simulated data packets per wall-second, and how both grow against the
# first run of each series (8 senders, 100 ms / 10 ms), measured in the
# same invocation (these machines are shared and noisy). A benchmark, not
# a test: it checks nothing.
#   scripts/bench-sim.sh [--quick]      (--quick: 10 ms runs only)
# ROCEMU=/path/to/rocemu runs another build (a baseline) on the same scenarios.
set -euo pipefail
cd "$(dirname "$0")/.."
ROCEMU=${ROCEMU:-build/bin/rocemu}
[ -x "$ROCEMU" ] || { echo "build first: scripts/setup.sh" >&2; exit 2; }
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
quick=0
[ "${1:-}" = "--quick" ] && quick=1

work=$(mktemp -d /tmp/rocemu-bench-sim.XXXXXX)
trap 'rm -rf "$work"' EXIT

# scenario N MS -> $work/incast-N-MS.yaml
scenario() {
  "$PY" - "$1" "$2" "$work" <<'EOF'
import sys
n, ms, work = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
hosts = n + 1
y = [f"name: incast-{n}-{ms}ms",
     f"description: HPCC-style {n}:1 incast, 100 Gbit/s, 1000-byte payloads, DCQCN (hpcc profile), {ms} ms",
     "seed: 1", f"duration: {ms}ms", "sample_interval: 100us", "until: duration",
     "topology:", "  engine: {mbufs: 65536}", "  nodes:"]
for i in range(hosts):
    y.append(f"    h{i}: {{kind: nic, ip: 10.{i // 250}.{i % 250}.1, prefix: 24, gateway: 10.{i // 250}.{i % 250}.254,"
             " cc: {algorithm: dcqcn, profile: hpcc}}")
y += ["    sw1:", "      kind: switch", f"      ports: {hosts}", "      interfaces:"]
for i in range(hosts):
    y.append(f"        swp{i + 1}: {{address: 10.{i // 250}.{i % 250}.254/24}}")
y += ["      qos:", "        roce: lossless", "        buffer: {size: 32MiB}",
      "        congestion-control: {3: {min-threshold: 400KB, max-threshold: 1600KB, probability: 20}}",
      "  links:"]
for i in range(hosts):
    y.append(f"    - {{a: h{i}, b: \"sw1:{i}\", rate: 100G, delay: 1us, mtu: 9000}}")
senders = ", ".join(f"h{i}" for i in range(n))
y += ["workloads:",
      f"  - {{name: incast, from: [{senders}], to: h{n}, verb: write, message_size: 1000, mtu: 1024,"
      f" window: 64, duration: {ms}ms}}",
      "expectations:",
      "  - {name: the bottleneck is busy, metric: bottleneck.utilization, op: \">\", value: 0}"]
open(f"{work}/incast-{n}-{ms}ms.yaml", "w").write("\n".join(y) + "\n")
EOF
}

# run N MS -> "wall_s process_s packets" on stdout: the run's own wall time
# as rocemu prints it (from time 0 to the end: building the fabric and
# starting DPDK excluded), the whole command's wall time (process start to
# exit, what a user waits for and what other simulators' figures are), and
# the data packets the bottleneck port sent.
run() {
  scenario "$1" "$2"
  local name="incast-$1-$2ms" t0 t1
  t0=$EPOCHREALTIME
  "$ROCEMU" sim "$work/$name.yaml" --no-plots -o "$work/$name" > "$work/$name.log" 2>&1 || {
    echo "rocemu sim failed:" >&2; cat "$work/$name.log" >&2; exit 1; }
  t1=$EPOCHREALTIME
  "$PY" -c 'import json, re, sys
d, t0, t1 = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
wall = re.search(r" in ([0-9.]+) s wall", open(d + ".log").read()).group(1)
print(wall, f"{t1 - t0:.2f}", json.load(open(d + "/summary.json"))["bottleneck"]["tx_packets"])' "$work/$name" "$t0" "$t1"
}

declare -A WALL PROC PKTS
if [ "$quick" = 1 ]; then
  runs=("8 10" "32 10" "128 10")
else
  runs=("8 10" "8 100" "8 1000" "32 100" "128 100")
fi
for r in "${runs[@]}"; do
  set -- $r
  echo "== $1 senders, $2 ms of virtual time" >&2
  read -r w c p < <(run "$1" "$2")
  WALL["$1 $2"]=$w
  PROC["$1 $2"]=$c
  PKTS["$1 $2"]=$p
done

echo
printf "%-8s %-10s %10s %10s %14s %16s %8s %8s\n" senders virtual_ms wall_s process_s data_packets packets/wall_s wall_x pkts_x
row() {  # senders ms base_key
  local k="$1 $2" b="$3"
  "$PY" -c 'import sys
n, ms, w, c, p, bw, bp = sys.argv[1:8]
w, c, p, bw, bp = float(w), float(c), int(p), float(bw), int(bp)
print(f"{n:<8} {ms:<10} {w:10.2f} {c:10.2f} {p:14d} {p / w:16.0f} {w / bw:8.2f} {p / bp:8.2f}")' \
    "$1" "$2" "${WALL[$k]}" "${PROC[$k]}" "${PKTS[$k]}" "${WALL[$b]}" "${PKTS[$b]}"
}
if [ "$quick" = 1 ]; then
  for n in 8 32 128; do row "$n" 10 "8 10"; done
else
  echo "-- senders (100 ms; x: against 8 senders)"
  for n in 8 32 128; do row "$n" 100 "8 100"; done
  echo "-- virtual time (8 senders; x: against 10 ms)"
  for ms in 10 100 1000; do row 8 "$ms" "8 10"; done
fi
