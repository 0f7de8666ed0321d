#!/usr/bin/env bash
# Benchmarks of the verbs provider (issue 11), through h1 -- sw1 -- h2 in
# real time on 100 Gbit/s and on 400 Gbit/s links
# (tests/bench/provider/h1-sw1-h2-{100,400}g.yaml: the built-in fabric, the
# second with rate 400G; two engines up side by side), each figure next to a
# baseline measured in the same run, rounds interleaved (the two fabrics
# alternate, which goes first alternates by round), medians over rounds:
#  1. memcpy bandwidth, one core, libc memcpy in 64 KiB calls: cache-resident
#     (64 KiB buffers reused, as perftest reuses its buffers) and from DRAM
#     (1 GiB buffers); `perf bench mem memcpy` once beside them;
#  2. ib_write_bw, ib_read_bw, ib_send_bw -e at -s 65536 and -s 4096, -q 1
#     and -q 4, on both fabrics (-D runs): ratios to issue 11's targets on
#     100 Gbit/s links (write 90, read 85, send -e 80 Gbit/s) and, on
#     400 Gbit/s links, to the memcpy limit (one cache-resident memcpy per
#     byte);
#  3. latency, typical (perftest's median of half round trips):
#     ib_write_lat and ib_send_lat (busy-polling) against the fabric's
#     modelled one-way delay (propagation + serialisation of the frame on
#     each link, from the topology file) + 2 x `perf bench sched pipe` (per
#     round trip), and against 1.5 x two processes ping-ponging through
#     shared memory beside a third busy-spinning process
#     (rocemu_pingpong_bench: three busy pollers on two cores, as perftest's
#     two and the engine thread); ib_send_lat -e against 3 x pipe;
#  4. the idle engine's CPU use;
#  5. with --fallback or BASELINE=<another build dir>: ib_write_bw /
#     ib_read_bw -s 65536 with MRs the engine maps against the fallback
#     (ROCEMU_DMA=process_vm) and that build's engine and provider;
#  6. with --profile: perf record of the engine thread during ib_write_bw
#     -s 65536 on 100 Gbit/s links, top symbols and the copy path's share
#     (memcpy/memmove);
#  7. with --events: ib_send_bw -e -s 65536 and ib_send_lat -e with
#     ibv_get_cq_event polling before it sleeps (ROCEMU_EVENT_POLL_US=50;
#     EVENT_POLL_US sets the time) against sleeping at once (the default).
# Every figure printed is the tool's own (perftest's result row, perf
# bench's line), checked for consistency where the tool gives two ways to
# it (a row's message rate x size against its bandwidth; pipe's total time
# / loops against its usecs/op); a mismatch is flagged with "!".
#   [BUILD=build] [BENCH_BUILD=$BUILD] [NO_BUILD=1] [BASELINE=<build dir>]
#   scripts/bench-provider.sh [--quick] [--profile] [--fallback] [--events] [ROUNDS]
# --quick: 1 round, -D 2 (checks the script). Default: 3 rounds, -D 2 (about
# 5 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
ROUNDS=3 DUR=2 PROFILE=0 FALLBACK=0 EVENTS=0
for a in "$@"; do
  case "$a" in
    --quick) ROUNDS=1 DUR=2 ;;
    --profile) PROFILE=1 ;;
    --events) EVENTS=1 ;;
    --fallback) FALLBACK=1 ;;
    [0-9]*) ROUNDS=$a ;;
    *) echo "usage: $0 [--quick] [--profile] [--fallback] [--events] [ROUNDS]" >&2; exit 2 ;;
  esac
done
[ -n "${BASELINE:-}" ] && FALLBACK=1
BUILD=$(realpath "${BUILD:-build}")
BENCH_BUILD=$(realpath "${BENCH_BUILD:-$BUILD}")
if [ -z "${NO_BUILD:-}" ]; then
  [ -x "$BUILD/bin/rocemu" ] || scripts/setup.sh
  ninja -C "$BUILD" rocemu rocemu-verbs >/dev/null
  ninja -C "$BENCH_BUILD" rocemu_memcpy_bench rocemu_pingpong_bench >/dev/null
fi
R=$BUILD/bin/rocemu
MEMCPY=$BENCH_BUILD/tests/bench/provider/rocemu_memcpy_bench
PINGPONG=$BENCH_BUILD/tests/bench/provider/rocemu_pingpong_bench
TOPO100=$SRC/tests/bench/provider/h1-sw1-h2-100g.yaml
TOPO400=$SRC/tests/bench/provider/h1-sw1-h2-400g.yaml
TMP=$(mktemp -d /tmp/rocemu-bench-XXXXXX)
D100=$TMP/100g D400=$TMP/400g
mkdir -m 700 "$D100" "$D400"
ENGINE_DIRS=()
cleanup() {
  for d in "${ENGINE_DIRS[@]}"; do ROCEMU_RUNTIME_DIR=$d "${RX_OF[$d]:-$R}" down >/dev/null 2>&1 || true; done
  rm -rf "$TMP"
}
declare -A RX_OF
trap cleanup EXIT
up() {  # up DIR TOPOLOGY [ROCEMU]: an engine with its runtime in DIR
  local r=${3:-$R}
  RX_OF[$1]=$r
  ENGINE_DIRS+=("$1")
  ROCEMU_RUNTIME_DIR=$1 "$r" up --daemon "$2" >/dev/null
}
up "$D100" "$TOPO100"; E100=$(cat "$D100/rocemu.pid")
up "$D400" "$TOPO400"; E400=$(cat "$D400/rocemu.pid")

# Medians and ranges of the numbers among their input lines (a failed run
# is "nan" and left out).
median() { awk '/^[0-9.]+$/' | sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "nan"}'; }
range() { awk '/^[0-9.]+$/' | sort -g | awk 'NR == 1 {lo=$1} {hi=$1} END {printf "%s..%s", NR ? lo : "nan", NR ? hi : "nan"}'; }
calc() { awk "BEGIN {printf \"%.${2:-2}f\", $1}"; }
# ratio A B [DIGITS]: A / B, or n/a when either is not a positive number
ratio() {
  awk -v a="$1" -v b="$2" -v d="${3:-2}" 'BEGIN {
    if (a !~ /^[0-9.]+$/ || b !~ /^[0-9.]+$/ || b + 0 == 0) print "n/a"; else printf "%.*f", d, a / b }'
}
load() { awk '{printf "load %s %s %s", $1, $2, $3}' /proc/loadavg; }

# pair DIR TOOL ARGS...: a perftest pair (server h2, client h1) on the engine
# whose runtime is DIR, with the environment in $PAIR_ENV; prints the
# client's result row (empty if there was none; the output is then kept in
# $TMP/last.*). Both sides are stopped after $PAIR_TIMEOUT s (a hung pair is
# reported, not waited for).
exited() {  # exited SIDE STATUS WHAT: a side that did not end normally, noted
  case "$2" in
    0) ;;
    124) echo "$3: the $1 was stopped after $PAIR_TIMEOUT s" >>"$TMP/problems" ;;
    *) echo "$3: the $1 exited with status $2" >>"$TMP/problems" ;;
  esac
}
pair() {
  local dir=$1 tool=$2; shift 2
  local r=${RX_OF[$dir]}
  local port=$((20000 + RANDOM % 20000))
  timeout -k 5 "$PAIR_TIMEOUT" env ROCEMU_RUNTIME_DIR="$dir" $PAIR_ENV "$r" exec h2 -- "$tool" -d rocemu0 -p $port "$@" \
    >"$TMP/last.server" 2>&1 &
  local spid=$! rc=0
  for _ in $(seq 1 250); do
    grep -q ":$(printf '%04X' $port) .* 0A" /proc/net/tcp /proc/net/tcp6 2>/dev/null && break
    sleep 0.02
  done
  timeout -k 5 "$PAIR_TIMEOUT" env ROCEMU_RUNTIME_DIR="$dir" $PAIR_ENV "$r" exec h1 -- "$tool" -d rocemu0 -p $port "$@" \
    127.0.0.1 >"$TMP/last.client" 2>&1 || rc=$?
  exited client "$rc" "$tool $*"
  rc=0
  wait $spid || rc=$?
  exited server "$rc" "$tool $*"
  grep -E '^ +[0-9]+ +[0-9]+ ' "$TMP/last.client" | tail -1 || true
}
PAIR_ENV=
PAIR_TIMEOUT=${PAIR_TIMEOUT:-60}

# bw DIR SIZE TOOL ARGS...: Gbit/s, perftest's "BW average" (--report_gbits);
# checked: the row's size, and its message rate x size = its bandwidth.
bw() {
  local dir=$1 size=$2; shift 2
  local row
  local PAIR_TIMEOUT=$((${BW_DUR:-$DUR} + 15))
  local run=(-D "${BW_DUR:-$DUR}")
  if [[ " $* " == *" -e "* ]]; then
    # perftest refuses -D with events: a count of about DUR s at 24 Gbit/s
    # (-n counts per QP)
    local q=1 prev='' a
    for a in "$@"; do
      [ "$prev" = -q ] && q=$a
      prev=$a
    done
    # A multiple of perftest's CQ moderation (100): Debian's perftest
    # (4.5-0.17) counts 100 iterations per send completion, so with -n not
    # a multiple of 100 and -q > 1 the QPs that finish first over-count,
    # the client stops polling before a lagging QP is done and spins
    # forever (seen here with -q 4 -n 366210; later perftest has fill_count).
    run=(-n $(( (${BW_DUR:-$DUR} * 3000000000 / size / q) / 100 * 100 )))
    PAIR_TIMEOUT=$((${BW_DUR:-$DUR} * 5 + 15))  # slower runs (4 KiB) are not hangs
  fi
  row=$(pair "$dir" "$@" -s "$size" "${run[@]}" --report_gbits)
  if [ -z "$row" ]; then
    echo "nan"
    { echo "$* -s $size: no result row"; tail -3 "$TMP/last.client"; } >>"$TMP/problems"
    return
  fi
  echo "$row" | awk -v s="$size" -v what="$* -s $size" -v p="$TMP/problems" '{
    if ($1 != s) print what ": row for " $1 " bytes: " $0 >> p;
    est = $5 * $1 * 8 / 1000;
    if ($4 > 0 && (est / $4 > 1.02 || est / $4 < 0.98))
      printf "%s: BW average %s Gbit/s but MsgRate %s Mpps x %s B = %.2f\n", what, $4, $5, $1, est >> p;
    print $4 }'
}
# lat DIR TOOL ARGS...: "typical min max avg" usec of perftest's row (-n 1000,
# 2-byte messages: on a loaded machine the mean round trip is milliseconds,
# so more would take long); checked: the row's size and count,
# min <= typical <= max.
LAT_N=1000
lat() {
  local dir=$1; shift
  local row
  row=$(pair "$dir" "$@" -n $LAT_N)
  if [ -z "$row" ]; then
    echo "nan nan nan nan"
    { echo "$*: no result row"; tail -3 "$TMP/last.client"; } >>"$TMP/problems"
    return
  fi
  echo "$row" | awk -v n=$LAT_N -v what="$*" -v p="$TMP/problems" '{
    if ($1 != 2 || $2 != n) print what ": row " $0 >> p;
    if ($5 < $3 || $5 > $4) print what ": typical outside min..max: " $0 >> p;
    print $5, $3, $4, $6 }'
}
# pipe_rt: usec per round trip of `perf bench sched pipe` (its usecs/op; an
# op is one round trip, two wake-ups), checked against its total time.
PIPE_LOOPS=50000
pipe_rt() {
  perf bench sched pipe -l $PIPE_LOOPS 2>/dev/null | awk -v n=$PIPE_LOOPS -v p="$TMP/problems" '
    /Total time/ {t = $3} /usecs\/op/ {u = $1}
    END { if (u == "") {print "nan"; exit}
          if (t != "" && (t * 1e6 / n / u > 1.02 || t * 1e6 / n / u < 0.98))
            printf "perf bench sched pipe: %s usecs/op but total %s s / %d loops\n", u, t, n >> p;
          print u }'
}

# The modelled one-way delay h1 -> h2 for a frame of FRAME bytes (without
# FCS): each link's propagation delay plus the frame's serialisation
# (padded to 60, + 24: preamble, FCS, inter-frame gap), in usec.
oneway_us() {
  awk -v frame="$2" '
    /^ *- *\{ *a:/ {
      rate = $0; sub(/.*rate: */, "", rate); sub(/[,} ].*/, "", rate)
      delay = $0; sub(/.*delay: */, "", delay); sub(/[,} ].*/, "", delay)
      bps = rate + 0
      if (rate ~ /G$/) bps *= 1e9; else if (rate ~ /M$/) bps *= 1e6; else if (rate ~ /T$/) bps *= 1e12
      d = delay + 0
      if (delay ~ /ns$/) d /= 1000; else if (delay ~ /ms$/) d *= 1000; else if (delay ~ /us$/) d *= 1; else d *= 1e6
      f = frame < 60 ? 60 : frame
      total += d + (f + 24) * 8 / bps * 1e6
      links++
    }
    END { printf "%.4f %d\n", total, links }' "$1"
}

echo "== bench-provider: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $ROUNDS round(s), -D $DUR; $(load)"
echo "   engines: 100G pid $E100, 400G pid $E400 ($(awk '/^policy/ {print ($3 == 1 ? "SCHED_FIFO" : "policy " $3)}' /proc/$E100/sched) engine thread)"
echo "   rocemu $R; topologies $TOPO100, $TOPO400"

echo "== 1. memcpy, one core, 64 KiB calls (GB/s = 1e9 B/s)"
mc=(); md=()
for i in $(seq 1 "$ROUNDS"); do
  c=$("$MEMCPY" 0.5 cache | awk '{print $1}')
  d=$("$MEMCPY" 1 dram 1024 | awk '{print $1}')
  mc+=("$c"); md+=("$d")
  printf "   round %d: cache-resident (64 KiB buffers) %7.2f GB/s   DRAM (1 GiB buffers) %6.2f GB/s   %s\n" "$i" "$c" "$d" "$(load)"
done
MC=$(printf "%s\n" "${mc[@]}" | median); MD=$(printf "%s\n" "${md[@]}" | median)
LIMIT=$(calc "$MC * 8" 1)
printf "   median: cache-resident %.2f GB/s = %s Gbit/s (the memcpy limit: one copy per byte); DRAM %.2f GB/s = %.1f Gbit/s\n" \
  "$MC" "$LIMIT" "$MD" "$(calc "$MD * 8" 1)"
# perf bench prints GB/sec as 2^30 bytes per second; one memcpy per buffer.
pc=$(perf bench mem memcpy -f default -s 64KB -l 100000 2>/dev/null | awk '/GB\/sec/ {print $1}')
pd=$(perf bench mem memcpy -f default -s 1GB -l 2 2>/dev/null | awk '/GB\/sec/ {print $1}')
printf "   perf bench mem memcpy -f default (one call per buffer): -s 64KB %s GiB/s = %s GB/s; -s 1GB %s GiB/s = %s GB/s\n" \
  "${pc:-n/a}" "$(calc "${pc:-0} * 1.073741824")" "${pd:-n/a}" "$(calc "${pd:-0} * 1.073741824")"

T0=$SECONDS
echo "== 2. bandwidth through h1 -- sw1 -- h2, -D $DUR (ib_send_bw -e: -n, perftest has no -D with events), Gbit/s (perftest's BW average)"
TOOLS=("ib_write_bw" "ib_read_bw" "ib_send_bw -e")
declare -A BW FAILED
for i in $(seq 1 "$ROUNDS"); do
  echo "   round $i: $(load)"
  for tool in "${TOOLS[@]}"; do
    for size in 65536 4096; do
      for q in 1 4; do
        key="$tool|$size|$q"
        if [ $((i % 2)) = 1 ]; then order="100 400"; else order="400 100"; fi
        declare -A got=()
        for rate in $order; do
          dir=$D100; [ "$rate" = 400 ] && dir=$D400
          if [ -n "${FAILED[$key|$rate]:-}" ]; then
            got[$rate]=skipped  # no result in an earlier round: not run again
            continue
          fi
          # shellcheck disable=SC2086
          got[$rate]=$(bw "$dir" "$size" $tool -q "$q")
          [ "${got[$rate]}" = nan ] && FAILED[$key|$rate]=1
          BW[$key|$rate]="${BW[$key|$rate]:-} ${got[$rate]}"
        done
        printf "     %-14s -s %-5s -q %s: 100G %7s   400G %7s\n" "$tool" "$size" "$q" "${got[100]}" "${got[400]}"
      done
    done
  done
done
echo "   medians (range over rounds); targets on 100G: write >= 90, read >= 85, send -e >= 80 Gbit/s;"
echo "   400G against the memcpy limit $LIMIT Gbit/s (median cache-resident memcpy of section 1)"
printf "   %-14s %-6s %-3s | %-20s %-9s | %-20s %-9s\n" tool size q "100G Gbit/s" "/target" "400G Gbit/s" "/memcpy"
for tool in "${TOOLS[@]}"; do
  case "$tool" in ib_write_bw) target=90 ;; ib_read_bw) target=85 ;; *) target=80 ;; esac
  for size in 65536 4096; do
    for q in 1 4; do
      key="$tool|$size|$q"
      a=$(echo ${BW[$key|100]} | tr ' ' '\n' | median); ar=$(echo ${BW[$key|100]} | tr ' ' '\n' | range)
      b=$(echo ${BW[$key|400]} | tr ' ' '\n' | median); br=$(echo ${BW[$key|400]} | tr ' ' '\n' | range)
      printf "   %-14s %-6s %-3s | %6s (%-11s) %5s/%-3s | %6s (%-11s) %s\n" "$tool" "$size" "$q" \
        "$a" "$ar" "$(ratio "$a" $target)" "$target" "$b" "$br" "$(ratio "$b" "$LIMIT")"
    done
  done
done

echo "   (section 2: $((SECONDS - T0)) s)"
T0=$SECONDS
echo "== 3. latency, typical usec (perftest's t_typical: median half round trip), 2-byte messages, 100G fabric"
read -r OW_WRITE NL < <(oneway_us "$TOPO100" 76)  # Eth 14 + IPv4 20 + UDP 8 + BTH 12 + RETH 16 + 2 + ICRC 4
read -r OW_SEND _ < <(oneway_us "$TOPO100" 60)    # the same without RETH
printf "   modelled one-way delay (%d links: propagation + serialisation): RDMA write %.4f usec, send %.4f usec\n" \
  "$NL" "$OW_WRITE" "$OW_SEND"
pp=(); pi=(); wl=(); sl=(); el=()
for i in $(seq 1 "$ROUNDS"); do
  p=$(pipe_rt)
  w=$(lat "$D100" ib_write_lat); s=$(lat "$D100" ib_send_lat); e=$(lat "$D100" ib_send_lat -e)
  g=$("$PINGPONG" 1 | awk '{print $2}')
  pi+=("$p"); wl+=("${w%% *}"); sl+=("${s%% *}"); el+=("${e%% *}"); pp+=("$g")
  printf "   round %d: pipe %6s usec/round trip   write_lat %8s   send_lat %8s   send_lat -e %8s   shm ping-pong + spinner %7s   %s\n" \
    "$i" "$p" "${w%% *}" "${s%% *}" "${e%% *}" "$g" "$(load)"
  printf "            min..max (mean): write_lat %s, send_lat %s, send_lat -e %s\n" \
    "$(echo "$w" | awk '{print $2 ".." $3 " (" $4 ")"}')" "$(echo "$s" | awk '{print $2 ".." $3 " (" $4 ")"}')" \
    "$(echo "$e" | awk '{print $2 ".." $3 " (" $4 ")"}')"
done
P=$(printf "%s\n" "${pi[@]}" | median); G=$(printf "%s\n" "${pp[@]}" | median)
W=$(printf "%s\n" "${wl[@]}" | median); S=$(printf "%s\n" "${sl[@]}" | median); E=$(printf "%s\n" "${el[@]}" | median)
TW=$(calc "$OW_WRITE + 2 * ${P/nan/0}" 3); TS=$(calc "$OW_SEND + 2 * ${P/nan/0}" 3); TE=$(calc "3 * ${P/nan/0}" 3)
TG=$(calc "1.5 * ${G/nan/0}" 3)
echo "   medians: perf bench sched pipe $P usec per round trip; shared-memory ping-pong beside a busy spinner $G usec"
printf "   %-28s %9s | %-26s %9s %6s | %-24s %9s %6s\n" "" typical "target: one-way + 2 x pipe" "" ratio "three-pollers 1.5 x ping" "" ratio
printf "   %-28s %9s | %-26s %9s %6s | %-24s %9s %6s\n" "ib_write_lat" "$W" "" "$TW" "$(ratio "$W" "$TW")" "" "$TG" "$(ratio "$W" "$TG" 1)"
printf "   %-28s %9s | %-26s %9s %6s | %-24s %9s %6s\n" "ib_send_lat (busy-polling)" "$S" "" "$TS" "$(ratio "$S" "$TS")" "" "$TG" "$(ratio "$S" "$TG" 1)"
printf "   %-28s %9s | %-26s %9s %6s\n" "ib_send_lat -e" "$E" "target: 3 x pipe" "$TE" "$(ratio "$E" "$TE")"
echo "   (ratio <= 1 meets the target; section 3: $((SECONDS - T0)) s)"

echo "== 4. idle engine CPU (no application, 2 s)"
a=$(awk '{print $14 + $15}' /proc/$E100/stat); sleep 2; b=$(awk '{print $14 + $15}' /proc/$E100/stat)
printf "   %.2f %% of one core\n" "$(calc "($b - $a) / $(getconf CLK_TCK) / 2 * 100")"

if [ "$FALLBACK" = 1 ]; then
  echo "== 5. ib_write_bw / ib_read_bw -s 65536 -D $DUR, 100G: mapped MRs vs process_vm_readv/writev${BASELINE:+ vs $BASELINE}"
  DB=
  if [ -n "${BASELINE:-}" ]; then
    DB=$TMP/base; mkdir -m 700 "$DB"
    up "$DB" "$TOPO100" "$BASELINE/bin/rocemu" >/dev/null
  fi
  for tool in ib_write_bw ib_read_bw; do
    m=(); f=(); b=()
    for i in $(seq 1 "$ROUNDS"); do
      m+=("$(PAIR_ENV='' bw "$D100" 65536 $tool)")
      f+=("$(PAIR_ENV=ROCEMU_DMA=process_vm bw "$D100" 65536 $tool)")
      line=$(printf "   round %d: %-11s mapped %7s   fallback %7s" "$i" "$tool" "${m[-1]}" "${f[-1]}")
      if [ -n "$DB" ]; then
        b+=("$(bw "$DB" 65536 $tool)")
        line+=$(printf "   baseline %7s" "${b[-1]}")
      fi
      echo "$line Gbit/s   $(load)"
    done
    M=$(printf "%s\n" "${m[@]}" | median); F=$(printf "%s\n" "${f[@]}" | median)
    printf "   median %s: mapped %s, fallback %s Gbit/s, ratio %s" "$tool" "$M" "$F" "$(ratio "$M" "$F")"
    if [ -n "$DB" ]; then
      B=$(printf "%s\n" "${b[@]}" | median)
      printf "; baseline %s, ratio %s" "$B" "$(ratio "$M" "$B")"
    fi
    echo
  done
fi

if [ "$EVENTS" = 1 ]; then
  echo "== 7. ibv_get_cq_event polling ${EVENT_POLL_US:-50} us before it sleeps (ROCEMU_EVENT_POLL_US) vs sleeping at once (the default), 100G"
  for tool in "ib_send_bw -e" "ib_send_lat -e"; do
    on=(); off=()
    for i in $(seq 1 "$ROUNDS"); do
      for mode in $([ $((i % 2)) = 1 ] && echo "on off" || echo "off on"); do
        us=${EVENT_POLL_US:-50}; [ "$mode" = off ] && us=0
        # shellcheck disable=SC2086
        if [ "$tool" = "ib_send_bw -e" ]; then v=$(PAIR_ENV=ROCEMU_EVENT_POLL_US=$us bw "$D100" 65536 $tool)
        else v=$(PAIR_ENV=ROCEMU_EVENT_POLL_US=$us lat "$D100" $tool | awk '{print $1}'); fi
        if [ "$mode" = on ]; then on+=("$v"); else off+=("$v"); fi
      done
      printf "   round %d: %-14s polling %8s   sleeping at once %8s %s   %s\n" "$i" "$tool" "${on[-1]}" "${off[-1]}" \
        "$([ "$tool" = "ib_send_bw -e" ] && echo Gbit/s || echo "usec typical")" "$(load)"
    done
    A=$(printf "%s\n" "${on[@]}" | median); B=$(printf "%s\n" "${off[@]}" | median)
    printf "   median %s: polling %s, sleeping at once %s, ratio %s\n" "$tool" "$A" "$B" "$(ratio "$A" "$B")"
  done
fi

if [ "$PROFILE" = 1 ]; then
  PD=$((DUR < 3 ? 3 : DUR))
  echo "== 6. profile of the engine thread (pid $E100) during ib_write_bw -s 65536 -q 1, 100G, ${PD} s"
  (BW_DUR=$((PD + 2)) bw "$D100" 65536 ib_write_bw >"$TMP/prof.bw") &
  ppid=$!
  sleep 1.5
  perf record -q -t "$E100" -o "$TMP/perf.data" -- sleep "$PD" >/dev/null 2>&1 || echo "   (perf record failed)"
  wait $ppid || true
  echo "   ib_write_bw during the profile: $(cat "$TMP/prof.bw") Gbit/s; $(load)"
  perf report -i "$TMP/perf.data" --stdio --no-children --sort symbol 2>/dev/null |
    awk '/^ +[0-9.]+%/ {n++; line = $0; sub(/[ \t-]+$/, "", line); if (n <= 15) printf "   %s\n", line;
                        v = $1; sub(/%/, "", v); s += v;
                        if ($0 ~ /mem(cpy|move)/) c += v}
         END {printf "   copy path (memcpy/memmove symbols): %.1f %% of %.1f %% sampled\n", c, s}'
fi

if [ -s "$TMP/problems" ]; then
  echo "== problems: a tool printed no result, or its figures disagreed with each other"
  sed 's/^/   ! /' "$TMP/problems"
fi
echo "== done in $SECONDS s: $(load)"
