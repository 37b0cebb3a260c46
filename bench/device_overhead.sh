#!/bin/sh
# device_overhead.sh BUILD [ROUNDS] [PAIRS]: what tpprof adds to a device
# allocate+free pair through each path (bench/device_overhead.c), on the
# CUDA test doubles: native and under the preload taking turns, ROUNDS
# rounds (default 7) of PAIRS pairs (default 900000) each; prints every
# round and the median added ns per pair and per call (a pair is two calls).
set -eu
BUILD=${1:?usage: device_overhead.sh BUILD [ROUNDS] [PAIRS]}
ROUNDS=${2:-7}
PAIRS=${3:-900000}
BIN=$BUILD/bench/device_overhead
LIB=$(cd "$BUILD/src/tpprof" && pwd)/libtpprof.so
FAKES=$(cd "$BUILD/tests/tpprof/cuda/fakes" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export LD_LIBRARY_PATH="$FAKES" TPFAKE_CU_FAST=1
echo "load: $(uptime)"
for path in runtime table driver; do
    : > "$TMP/$path"
    r=1
    while [ "$r" -le "$ROUNDS" ]; do
        n=$("$BIN" "$path" "$PAIRS")
        t=$(LD_PRELOAD="$LIB" TPPROF_OUTPUT="$TMP/rec.db" "$BIN" "$path" "$PAIRS")
        echo "$path round $r: native $n, tpprof $t (wall, thread cpu ns/pair)" >&2
        echo "$n $t" | awk '{print $2, $3, $5, $6}' >> "$TMP/$path"
        r=$((r + 1))
    done
    for col in wall cpu; do
        c=1; [ "$col" = cpu ] && c=2
        awk -v c=$c '{print $(c+2) - $c, $c}' "$TMP/$path" | sort -n | awk -v p="$path" -v col=$col \
            '{d[NR]=$1; n[NR]=$2} END {m=d[int((NR+1)/2)]; printf "%s %s: added median %.1f ns/pair = %.1f ns/call (rounds %.1f..%.1f ns/pair; native about %.1f ns/pair)\n", p, col, m, m/2, d[1], d[NR], n[int((NR+1)/2)]}'
    done
done
