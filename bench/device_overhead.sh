#!/bin/sh
# device_overhead.sh BUILD [ROUNDS] [PAIRS]: what tpprof adds to a device
# allocate+free pair through each path (bench/device_overhead.c), on the
# CUDA test doubles: native and under the preload taking turns, ROUNDS
# rounds (default 7) of PAIRS pairs (default 900000) each; prints every
# round and the median added ns per pair and per call (a pair is two calls):
#   wall     in the program's loop (median of its 9 blocks)
#   cpu      the program thread's CPU time in that loop (the hooks)
#   process  the whole process, start to exit, less the same program's with
#            9 pairs (start-up), divided by PAIRS: the loop and the
#            writer's work it did not wait for in the loop (the exit's
#            final flush writes what was still pending): what a user
#            waits for
# TPPROF_BENCH_LIB=PATH measures another libtpprof.so (a before/after
# comparison: run the script with each, or see docs/device.md, "Cost").
set -eu
BUILD=${1:?usage: device_overhead.sh BUILD [ROUNDS] [PAIRS]}
ROUNDS=${2:-7}
PAIRS=${3:-900000}
BIN=$BUILD/bench/device_overhead
LIB=${TPPROF_BENCH_LIB:-$(cd "$BUILD/src/tpprof" && pwd)/libtpprof.so}
FAKES=$(cd "$BUILD/tests/tpprof/cuda/fakes" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export LD_LIBRARY_PATH="$FAKES" TPFAKE_CU_FAST=1
now() { date +%s%N; }
echo "load: $(uptime)"
echo "lib: $LIB"
for path in runtime table driver; do
    : > "$TMP/$path"
    r=1
    while [ "$r" -le "$ROUNDS" ]; do
        s=$(now); "$BIN" "$path" 9 > /dev/null; e=$(now); n0=$((e - s))
        s=$(now); n=$("$BIN" "$path" "$PAIRS"); e=$(now); np=$((e - s - n0))
        rm -f "$TMP/rec.db"
        s=$(now); LD_PRELOAD="$LIB" TPPROF_OUTPUT="$TMP/rec.db" "$BIN" "$path" 9 > /dev/null; e=$(now); t0=$((e - s))
        rm -f "$TMP/rec.db"
        s=$(now); t=$(LD_PRELOAD="$LIB" TPPROF_OUTPUT="$TMP/rec.db" "$BIN" "$path" "$PAIRS"); e=$(now); tp=$((e - s - t0))
        echo "$path round $r: native $n ($np ns), tpprof $t ($tp ns) (wall, thread cpu ns/pair; process ns)" >&2
        echo "$n $t $np $tp" | awk -v p="$PAIRS" '{print $2, $3, $5, $6, $7 / p, $8 / p}' >> "$TMP/$path"
        r=$((r + 1))
    done
    for col in wall cpu process; do
        c=1; [ "$col" = cpu ] && c=2; [ "$col" = process ] && c=5
        d=2; [ "$col" = process ] && d=1
        awk -v c=$c -v d=$d '{print $(c+d) - $c, $c}' "$TMP/$path" | sort -n | awk -v p="$path" -v col=$col \
            '{d[NR]=$1; n[NR]=$2} END {m=d[int((NR+1)/2)]; printf "%s %s: added median %.1f ns/pair = %.1f ns/call (rounds %.1f..%.1f ns/pair; native about %.1f ns/pair)\n", p, col, m, m/2, d[1], d[NR], n[int((NR+1)/2)]}'
    done
done
