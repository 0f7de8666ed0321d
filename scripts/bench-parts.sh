#!/usr/bin/env bash
# One fabric on two engines against the same fabric on one: ib_write_bw
# -s 65536 from h1 to h2 of tests/e2e/data/two-racks.yaml (h1 -- sw1 |
# trunk | sw2 -- h2, 25 Gbit/s links), rounds interleaved:
#  - one engine: `rocemu up two-racks.yaml` runs both parts, the trunk an
#    internal link; perftest's out-of-band TCP over loopback;
#  - two engines: two network namespaces joined by a veth pair (MTU 4200),
#    each running `rocemu up two-racks.yaml --part rackN`, the trunk cut into
#    net_af_packet ports on the veth ends; perftest in the namespaces, its
#    TCP over the veth addresses.
# Prints each round, the medians, the ratio and the load average. Needs root
# (ip netns); removes what it makes.
#   scripts/bench-parts.sh [ROUNDS] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
SECS=${2:-3}
[ "$(id -u)" = 0 ] || { echo "bench-parts.sh: needs root (ip netns add)" >&2; exit 1; }
nice -n 10 ninja -C build -j2 rocemu rocemu-verbs >/dev/null
R=$PWD/build/bin/rocemu
TOPO=$PWD/tests/e2e/data/two-racks.yaml
NA=rocemu-bench-a-$$ NB=rocemu-bench-b-$$
DIR1=$(mktemp -d /tmp/rocemu-bench-1-XXXXXX) DIRA=$(mktemp -d /tmp/rocemu-bench-a-XXXXXX)
DIRB=$(mktemp -d /tmp/rocemu-bench-b-XXXXXX)
# stop RUNTIME_DIR [NETNS]: `rocemu down`, then the engine by its PID if it
# is still there (ours: started by this script, its PID in rocemu.pid).
stop() {
  local dir=$1 ns=${2:-} w=() pid
  [ -n "$ns" ] && w=(ip netns exec "$ns")
  ROCEMU_RUNTIME_DIR=$dir "${w[@]}" "$R" down >/dev/null 2>&1 || true
  pid=$(cat "$dir/rocemu.pid" 2>/dev/null || true)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
}
cleanup() {
  stop "$DIR1"
  stop "$DIRA" "$NA"
  stop "$DIRB" "$NB"
  ip netns del "$NA" 2>/dev/null || true
  ip netns del "$NB" 2>/dev/null || true
  rm -rf "$DIR1" "$DIRA" "$DIRB" /tmp/rocemu-bench-parts.$$
}
trap cleanup EXIT
ip netns add "$NA"
ip netns add "$NB"
ip -n "$NA" link add vea type veth peer name veb netns "$NB"
ip -n "$NA" addr add 192.168.77.1/24 dev vea
ip -n "$NB" addr add 192.168.77.2/24 dev veb
ip -n "$NA" link set vea mtu 4200 up
ip -n "$NB" link set veb mtu 4200 up
ip -n "$NA" link set lo up
ip -n "$NB" link set lo up

ROCEMU_RUNTIME_DIR=$DIR1 "$R" up --daemon "$TOPO" >/dev/null
ROCEMU_RUNTIME_DIR=$DIRA ip netns exec "$NA" "$R" up --daemon "$TOPO" --part rack1 >/dev/null
ROCEMU_RUNTIME_DIR=$DIRB ip netns exec "$NB" "$R" up --daemon "$TOPO" --part rack2 >/dev/null

BW=(ib_write_bw -d rocemu0 -x 3 -F --report_gbits -s 65536 -D "$SECS")
# pair RUNTIME_A RUNTIME_B NETNS_A NETNS_B SERVER_ADDR: the client's BW average.
pair() {
  local ra=$1 rb=$2 na=$3 nb=$4 addr=$5 port=$((20000 + RANDOM % 20000)) wa=() wb=()
  [ -n "$na" ] && wa=(ip netns exec "$na")
  [ -n "$nb" ] && wb=(ip netns exec "$nb")
  ROCEMU_RUNTIME_DIR=$rb "${wb[@]}" "$R" exec h2 -- "${BW[@]}" -p $port >/tmp/rocemu-bench-parts.$$ 2>&1 &
  local spid=$! net=/proc/net
  [ -n "$nb" ] && net=/proc/$spid/net
  for _ in $(seq 1 200); do
    grep -q ":$(printf '%04X' $port) .* 0A" $net/tcp 2>/dev/null && break
    sleep 0.02
  done
  ROCEMU_RUNTIME_DIR=$ra "${wa[@]}" "$R" exec h1 -- "${BW[@]}" -p $port "$addr" 2>&1 |
    awk '$1 == 65536 {print $4}' | tail -1
  wait $spid || true
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "== ib_write_bw -s 65536 -D $SECS, h1 -> h2: two engines over a veth pair vs one engine ($ROUNDS rounds)"
uptime
one=(); two=()
for i in $(seq 1 "$ROUNDS"); do
  one+=("$(pair "$DIR1" "$DIR1" "" "" 127.0.0.1)")
  two+=("$(pair "$DIRA" "$DIRB" "$NA" "$NB" 192.168.77.2)")
  printf "   round %d: one engine %6.2f   two engines %6.2f Gbit/s\n" "$i" "${one[-1]}" "${two[-1]}"
done
O=$(printf "%s\n" "${one[@]}" | median)
T=$(printf "%s\n" "${two[@]}" | median)
printf "   median: one engine %.2f, two engines %.2f Gbit/s, ratio two/one %.2f\n" "$O" "$T" \
  "$(awk -v a="$T" -v b="$O" 'BEGIN {print a / b}')"
uptime
echo "   the two engines after the runs: trunk bytes each way, PFC, ECN, resends:"
ROCEMU_RUNTIME_DIR=$DIRA "$R" counters | grep -E "^sw1/swp2 .*(roce-bytes|pfc|ecn-marked-packets|imissed)|^sw1/swp1 .*(discard|slack)|^h1 .*(retransmitted|cnp_handled|rx_pfc)" |
  sed 's/^/     A: /' || true
ROCEMU_RUNTIME_DIR=$DIRB "$R" counters | grep -E "^sw2/swp2 .*(roce-bytes|pfc|ecn-marked-packets|imissed)|^h2 .*(out_of_sequence|packet_seq_err|cnp_sent)" |
  sed 's/^/     B: /' || true
# RoCE lost on the trunk: what sw1 sent out of its external port against
# what sw2 took in on its own (frames engine B's af_packet ring had no room
# for are lost in the kernel; the PMD does not count them).
SENT=$(ROCEMU_RUNTIME_DIR=$DIRA "$R" counters sw1/swp2 | awk '$2 == "tx-roce-stats.roce-bytes" {print $3}')
GOT=$(ROCEMU_RUNTIME_DIR=$DIRB "$R" counters sw2/swp2 | awk '$2 == "rx-roce-stats.roce-bytes" {print $3}')
echo "     trunk A -> B: sw1 sent ${SENT:-0} RoCE bytes, sw2 received ${GOT:-0}: $((${SENT:-0} - ${GOT:-0})) lost on the way"
