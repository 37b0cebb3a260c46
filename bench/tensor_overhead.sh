#!/bin/sh
# bench/tensor_overhead.sh - what tpprof's tensor tracking adds over its
# host-only recording, per observer event (see bench/tensor_overhead.c).
#
# Usage: bench/tensor_overhead.sh BUILD_DIR [iterations] [runs]
# Runs the workload native, under the preload with TPPROF_TENSORS=0 (host
# only) and with tensors, interleaved, `runs` times each; prints the median
# ns per iteration of each, the events per iteration (from the recording) and
# the added cost per observer event. A benchmark: it never fails a build.
set -eu
build=$(cd "$1" && pwd)
iters=${2:-200000}
runs=${3:-5}
prog="$build/bench/tensor_overhead"
lib="$build/src/tpprof/libtpprof.so"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for i in $(seq "$runs"); do
  "$prog" "$iters" | sed 's/.*ns_per_iteration=//' >> "$tmp/native"
  LD_PRELOAD="$lib" TPPROF_TENSORS=0 TPPROF_OUTPUT="$tmp/host.db" "$prog" "$iters" | sed 's/.*ns_per_iteration=//' >> "$tmp/host"
  LD_PRELOAD="$lib" TPPROF_OUTPUT="$tmp/tensors.db" "$prog" "$iters" | sed 's/.*ns_per_iteration=//' >> "$tmp/tensors"
done
median() { sort -n "$1" | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
n=$(median "$tmp/native"); h=$(median "$tmp/host"); t=$(median "$tmp/tensors")
# Observer events per iteration: refcount changes plus lifecycle events.
rc=$(sqlite3 "$tmp/tensors.db" "SELECT coalesce(sum(count), 0) FROM refcount_sites")
mallocs=$(sqlite3 "$tmp/tensors.db" "SELECT coalesce(sum(alloc_count), 0) FROM sites")
awk -v n="$n" -v h="$h" -v t="$t" -v rc="$rc" -v m="$mallocs" -v it="$iters" 'BEGIN {
  rpi = rc / it; ev = rpi * 2;  # lifecycle events (created/freed/released) are about as many as refcount changes
  printf "native        %8.1f ns/iteration\n", n
  printf "host only     %8.1f ns/iteration  (%.2fx native, %.1f mallocs/iteration)\n", h, h / n, m / it
  printf "with tensors  %8.1f ns/iteration  (%.2fx native, +%.1f%% over host only)\n", t, t / n, (t - h) / h * 100
  printf "refcount changes/iteration %.2f; added cost per refcount change %.1f ns\n", rpi, (t - h) / rpi
}'
