#!/usr/bin/env bash
# ECMP balance on RoCE entropy: a leaf-spine made by `rocemu topo` (2 leaves,
# 4 spines, 4 hosts per leaf, 100 Gbit/s, 1:1), host i of leaf1 writing to
# host i of leaf2 (h1 -> h5, ..., h4 -> h8) with 16, 64 and 256 QPs in all (each QP carrying the
# same bytes: 4 messages of 64 KiB), run by `rocemu sim` in virtual time.
# The QPs' UDP source ports (the NIC's flow-label formula of the QPNs) are
# the only thing that differs between them, so leaf1's choice of uplink is
# the hash alone. Prints, per QP count, the bytes on each of leaf1's four
# uplinks (the switch's ecmp.tx-bytes counters), each uplink's share,
# Jain's index across them (1: even, 0.25: all on one) and the largest
# share; then the same with the hash seed changed (`forwarding.hash-seed`).
# A benchmark, not a test: it checks nothing.
#   scripts/bench-ecmp.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROCEMU=build/bin/rocemu
[ -x "$ROCEMU" ] || { echo "build first: scripts/setup.sh" >&2; exit 2; }
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

work=$(mktemp -d /tmp/rocemu-bench-ecmp.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$ROCEMU" topo leaf-spine --leaves 2 --spines 4 --hosts-per-leaf 4 --rate 100G -o "$work/ls.yaml" 2>/dev/null
sed 's/hash-seed: 0/hash-seed: 7/' "$work/ls.yaml" > "$work/ls-seed7.yaml"

printf '%-6s %-5s %14s %14s %14s %14s  %7s %9s %7s\n' qps seed swp5 swp6 swp7 swp8 jain max_share wall_s
for seed in 0 7; do
  topo=ls.yaml
  [ "$seed" = 7 ] && topo=ls-seed7.yaml
  for qps in 16 64 256; do
    per=$((qps / 4))
    cat > "$work/s.yaml" <<EOF
name: ecmp-$qps
description: $qps QPs from leaf1's hosts to leaf2's, 4 x 64 KiB per QP
topology_file: $topo
duration: 10ms
sample_interval: 100us
workloads:
  - {name: w1, from: [h1], to: h5, message_size: 64KiB, count: $((per * 4)), qps: $per, mtu: 4096, window: 2}
  - {name: w2, from: [h2], to: h6, message_size: 64KiB, count: $((per * 4)), qps: $per, mtu: 4096, window: 2}
  - {name: w3, from: [h3], to: h7, message_size: 64KiB, count: $((per * 4)), qps: $per, mtu: 4096, window: 2}
  - {name: w4, from: [h4], to: h8, message_size: 64KiB, count: $((per * 4)), qps: $per, mtu: 4096, window: 2}
expectations:
  - {name: done, metric: flow_stats.all_completed, op: "==", value: true}
EOF
    t0=$(date +%s.%N)
    "$ROCEMU" sim "$work/s.yaml" -o "$work/out" --no-plots > "$work/log" 2>&1 || { cat "$work/log"; exit 1; }
    t1=$(date +%s.%N)
    "$PY" - "$work/out/summary.json" "$qps" "$seed" "$t0" "$t1" <<'PYEOF'
import json, sys
s = json.load(open(sys.argv[1]))
leaf = s["ecmp"]["switches"]["leaf1"]
ports = ["swp5", "swp6", "swp7", "swp8"]
cells = ["%9d %3.0f%%" % (leaf["ports"][p]["bytes"], 100 * leaf["ports"][p]["share"]) for p in ports]
print("%-6s %-5s %s  %7.4f %9.4f %7.2f" % (sys.argv[2], sys.argv[3], " ".join("%14s" % c for c in cells),
      leaf["jain_bytes"], leaf["max_share"], float(sys.argv[5]) - float(sys.argv[4])))
PYEOF
  done
done
