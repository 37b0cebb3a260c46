#!/bin/bash
# bench/python_frames.sh - what Python frames in the stacks cost a Python
# program: tests/python/alloc_heavy.py (pure Python, objects over pymalloc's
# 512-byte limit, so each is a malloc and a free) run natively, under the
# preload with TPPROF_PYTHON=0 (native stacks) and with Python frames,
# interleaved (the order rotates each round), `rounds` times each. Prints
# each run's elapsed and CPU seconds (user + sys, the writer thread
# included), the medians, their ratios to native, and the mallocs recorded
# (so the added cost per allocation). A benchmark: it never fails a build.
#
# Usage: bench/python_frames.sh BUILD_DIR [iterations] [rounds] [python]
set -eu
build=$(cd "$1" && pwd)
iters=${2:-1000000}
rounds=${3:-5}
py=${4:-/usr/bin/python3}
lib="$build/src/tpprof/libtpprof.so"
script="$(cd "$(dirname "$0")/.." && pwd)/tests/python/alloc_heavy.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
one() { # name, then env assignments; appends "wall cpu" to $tmp/name
  local name=$1; shift
  local t0 t1 c
  t0=$(date +%s.%N)
  c=$( { /usr/bin/time -f "%U %S" env "$@" "$py" "$script" "$iters" >/dev/null; } 2>&1 | tail -1)
  t1=$(date +%s.%N)
  echo "$(echo "$t1 - $t0" | bc) $(echo "$c" | awk '{print $1 + $2}')" >> "$tmp/$name"
}
variants=(native off frames)
for r in $(seq 1 "$rounds"); do
  for k in 0 1 2; do
    v=${variants[$(( (r + k) % 3 ))]}
    case $v in
      native) one native X=1 ;;
      off) one off LD_PRELOAD="$lib" TPPROF_PYTHON=0 TPPROF_OUTPUT="$tmp/off.db" ;;
      frames) one frames LD_PRELOAD="$lib" TPPROF_OUTPUT="$tmp/frames.db" ;;
    esac
  done
done
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for v in "${variants[@]}"; do
  echo "$v: wall $(cut -d' ' -f1 "$tmp/$v" | tr '\n' ' ')| cpu $(cut -d' ' -f2 "$tmp/$v" | tr '\n' ' ')"
  cut -d' ' -f1 "$tmp/$v" | median > "$tmp/$v.mw"
  cut -d' ' -f2 "$tmp/$v" | median > "$tmp/$v.mc"
done
nw=$(cat "$tmp/native.mw") nc=$(cat "$tmp/native.mc")
n=$(sqlite3 "$tmp/frames.db" "SELECT SUM(alloc_count) FROM sites")
for v in "${variants[@]}"; do
  w=$(cat "$tmp/$v.mw") c=$(cat "$tmp/$v.mc")
  printf '%-7s median wall %.3f s (%.2fx native), cpu %.3f s (%.2fx native)\n' "$v" "$w" \
    "$(echo "$w / $nw" | bc -l)" "$c" "$(echo "$c / $nc" | bc -l)"
done
ow=$(cat "$tmp/off.mw") fw=$(cat "$tmp/frames.mw") oc=$(cat "$tmp/off.mc") fc=$(cat "$tmp/frames.mc")
printf 'allocations recorded: %s; Python frames add %.0f ns wall, %.0f ns cpu per allocation\n' "$n" \
  "$(echo "($fw - $ow) * 1000000000 / $n" | bc -l)" "$(echo "($fc - $oc) * 1000000000 / $n" | bc -l)"
echo "stacks: $(sqlite3 "$tmp/frames.db" "SELECT COUNT(DISTINCT stack_id) FROM sites") distinct, Python frames: $(sqlite3 "$tmp/frames.db" "SELECT COUNT(*) FROM py_frames")"
