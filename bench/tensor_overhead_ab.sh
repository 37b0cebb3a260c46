#!/bin/sh
# bench/tensor_overhead_ab.sh - tensor tracking's cost over host-only
# recording under two recorders in the same interleaved rounds (a change
# against the one before it): separate runs of bench/tensor_overhead.sh on
# these shared machines differ by more than a change does.
#
# Usage: bench/tensor_overhead_ab.sh BASE_BUILD NEW_BUILD [iterations] [rounds]
# Each round runs bench/tensor_overhead (NEW_BUILD's program: the runtime is
# the same) host-only (TPPROF_TENSORS=0) and with tensors under BASE_BUILD's
# libtpprof.so and NEW_BUILD's, in an order that alternates between rounds;
# prints the medians of the per-round ratios tensors / host-only of each
# recorder: the whole process's CPU (every thread, the writer included),
# the program thread's, the elapsed time, and the CPU each adds per
# refcount change (5 an iteration). A benchmark: it never fails a build.
set -eu
base=$(cd "$1" && pwd)
new=$(cd "$2" && pwd)
iters=${3:-400000}
rounds=${4:-16}
prog="$new/bench/tensor_overhead"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# "cpu main wall" ns per iteration of one run under build $1, with env $2.
run() {
  env LD_PRELOAD="$1/src/tpprof/libtpprof.so" TPPROF_OUTPUT="$tmp/r.db" $2 "$prog" "$iters" 16 |
    sed 's/.*cpu_ns_per_iteration=\([0-9.]*\) main_cpu_ns_per_iteration=\([0-9.]*\) ns_per_iteration=\([0-9.]*\)/\1 \2 \3/'
  rm -f "$tmp"/r.db*
}
for r in $(seq "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then
    bh=$(run "$base" TPPROF_TENSORS=0); bt=$(run "$base" TPPROF_TENSORS=1)
    nh=$(run "$new" TPPROF_TENSORS=0); nt=$(run "$new" TPPROF_TENSORS=1)
  else
    nt=$(run "$new" TPPROF_TENSORS=1); nh=$(run "$new" TPPROF_TENSORS=0)
    bt=$(run "$base" TPPROF_TENSORS=1); bh=$(run "$base" TPPROF_TENSORS=0)
  fi
  echo "$bh $bt $nh $nt"
done > "$tmp/rounds"
awk -v n="$rounds" '
function med(v,  i, j, t, w) { for (i = 1; i <= n; i++) w[i] = v[i]
  for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (w[j] < w[i]) { t = w[i]; w[i] = w[j]; w[j] = t }
  return n % 2 ? w[(n + 1) / 2] : (w[n / 2] + w[n / 2 + 1]) / 2 }
{ bc[NR] = $4 / $1; bm[NR] = $5 / $2; bw[NR] = $6 / $3; nc[NR] = $10 / $7; nm[NR] = $11 / $8; nw[NR] = $12 / $9
  ba[NR] = $4 - $1; na[NR] = $10 - $7 }
END {
  printf "%d rounds, tensors over host-only (medians of the per-round ratios), base / new:\n", n
  printf "  CPU (all threads)         +%.1f%% / +%.1f%%\n", (med(bc) - 1) * 100, (med(nc) - 1) * 100
  printf "  CPU (the program thread)  +%.1f%% / +%.1f%%\n", (med(bm) - 1) * 100, (med(nm) - 1) * 100
  printf "  elapsed                   +%.1f%% / +%.1f%%\n", (med(bw) - 1) * 100, (med(nw) - 1) * 100
  printf "  CPU added per refcount change  %.1f / %.1f ns\n", med(ba) / 5, med(na) / 5
}' "$tmp/rounds"
