#!/bin/sh
# bench/tensor_instructions.sh - what tensor tracking adds over host-only
# recording, counted in instructions of the program's own thread: callgrind
# (valgrind) over main() only, so neither start-up nor the exit's final drain
# and scan count, at two iteration counts, the difference divided by the
# iterations between them. Deterministic where bench/tensor_overhead.sh's
# timings swing by several percent on a shared machine; it cannot see what
# an instruction costs (an atomic increment, a cache miss), so read it with
# the timed one.
#
# Usage: bench/tensor_instructions.sh BUILD_DIR [elements]   (needs valgrind)
set -eu
build=$(cd "$1" && pwd)
elements=${2:-16}
command -v valgrind >/dev/null || { echo "tensor_instructions: valgrind is not installed" >&2; exit 2; }
prog="$build/bench/tensor_overhead"
lib="$build/src/tpprof/libtpprof.so"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Instructions of the program's thread inside main(), for $1 iterations,
# TPPROF_TENSORS=$2.
count() {
  rm -f "$tmp"/cg.* "$tmp"/t.db*
  LD_PRELOAD="$lib" TPPROF_TENSORS="$2" TPPROF_OUTPUT="$tmp/t.db" setarch -R valgrind --tool=callgrind --separate-threads=yes \
    --toggle-collect=main --callgrind-out-file="$tmp/cg.%p" "$prog" "$1" "$elements" >/dev/null 2>&1
  grep -h '^summary\|^totals' "$tmp"/cg.*-01 | head -1 | awk '{print $2}'
}
lo=20000 hi=40000
h=$(( ($(count $hi 0) - $(count $lo 0)) / (hi - lo) ))
t=$(( ($(count $hi 1) - $(count $lo 1)) / (hi - lo) ))
awk -v h="$h" -v t="$t" -v e="$elements" 'BEGIN {
  printf "instructions per iteration (%d elements), the program thread:\n", e
  printf "  host only     %6d\n  with tensors  %6d  (+%d, +%.1f%%)\n", h, t, t - h, (t - h) * 100 / h
}'
