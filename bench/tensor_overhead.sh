#!/bin/sh
# bench/tensor_overhead.sh - what tpprof's tensor tracking adds over its
# host-only recording, per observer event (see bench/tensor_overhead.c).
#
# Usage: bench/tensor_overhead.sh BUILD_DIR [iterations] [runs] [elements]
# Runs the workload native, under the preload with TPPROF_TENSORS=0 (host
# only) and with tensors, interleaved (host-only and tensors in turn first),
# `runs` times each; prints the median (and the fastest run)
# ns per iteration of each, elapsed and CPU (all threads, tpprof's writer
# included: steadier than elapsed time on a machine shared with other work),
# the events per iteration (from the recording) and the added cost per
# refcount change. Then the steadiest figure: `runs` processes under the
# preload that each measure both sides themselves, in alternating blocks of
# 10000 iterations with the observer attached and detached (what
# TPPROF_TENSORS=0 gives; see bench/tensor_overhead.c), the median of each
# process's paired block ratios: separate runs on these shared machines
# differ by more than what is measured. (Blocks of 1000 read 2-3 points
# lower: the writer is still applying the last attached block's records
# through much of a detached one, and its work on another core slows the
# program's; pinned to one CPU, both read ~8%.) A benchmark: it never fails
# a build.
set -eu
build=$(cd "$1" && pwd)
iters=${2:-200000}
runs=${3:-5}
elements=${4:-16}
prog="$build/bench/tensor_overhead"
lib="$build/src/tpprof/libtpprof.so"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Appends the elapsed, CPU and program-thread CPU ns per iteration of one run
# to $1.wall, $1.cpu, $1.main.
run() {
  out=$1; shift
  line=$("$@")
  echo "$line" | sed 's/.* ns_per_iteration=//' >> "$out.wall"
  echo "$line" | sed 's/.* cpu_ns_per_iteration=\([0-9.]*\).*/\1/' >> "$out.cpu"
  echo "$line" | sed 's/.*main_cpu_ns_per_iteration=\([0-9.]*\).*/\1/' >> "$out.main"
}
# Rounds alternate which of host-only and tensors runs first: a run right
# after another is not quite like one after a pause (these machines' speed
# drifts within seconds), and a fixed order would give that to one side.
host_run() { run "$tmp/host" env LD_PRELOAD="$lib" TPPROF_TENSORS=0 TPPROF_OUTPUT="$tmp/host.db" "$prog" "$iters" "$elements"; }
tensors_run() { run "$tmp/tensors" env LD_PRELOAD="$lib" TPPROF_OUTPUT="$tmp/tensors.db" "$prog" "$iters" "$elements"; }
for i in $(seq "$runs"); do
  run "$tmp/native" "$prog" "$iters" "$elements"
  if [ $((i % 2)) -eq 1 ]; then host_run; tensors_run; else tensors_run; host_run; fi
done
median() { sort -n "$1" | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
# The fastest run of each: on these shared machines a run is only ever
# slowed by the others, so the fastest is the steadiest estimate of what the
# tool itself costs (bench/tpprof_overhead.py's "x (min)").
fastest() { sort -n "$1" | head -1; }
# Median of the per-round ratios tensors/host: the rounds run back to back,
# so a machine that is slower for a while (these shared 2-core machines
# swing by 20% between runs) slows both sides of a round alike.
paired() { paste "$1" "$2" | awk '{print $2 / $1}' | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
# Refcount changes per iteration, from the recording.
rc=$(sqlite3 "$tmp/tensors.db" "SELECT coalesce(sum(count), 0) FROM refcount_sites")
mallocs=$(sqlite3 "$tmp/tensors.db" "SELECT coalesce(sum(alloc_count), 0) FROM sites")
for k in wall main cpu; do
  awk -v k="$k" -v n="$(median "$tmp/native.$k")" -v h="$(median "$tmp/host.$k")" -v t="$(median "$tmp/tensors.$k")" \
      -v p="$(paired "$tmp/host.$k" "$tmp/tensors.$k")" \
      -v hf="$(fastest "$tmp/host.$k")" -v tf="$(fastest "$tmp/tensors.$k")" \
      -v rc="$rc" -v m="$mallocs" -v it="$iters" 'BEGIN {
    rpi = rc / it
    printf "%s:\n", k == "wall" ? "elapsed" : k == "main" ? "CPU (the program thread)" : "CPU (all threads)"
    printf "  native        %8.1f ns/iteration\n", n
    printf "  host only     %8.1f ns/iteration  (%.2fx native, %.1f mallocs/iteration)\n", h, h / n, m / it
    printf "  with tensors  %8.1f ns/iteration  (%.2fx native, +%.1f%% over host only; paired rounds: +%.1f%%)\n", t, t / n, (t - h) / h * 100, (p - 1) * 100
    printf "  fastest runs  host only %.1f, with tensors %.1f ns/iteration (+%.1f%%)\n", hf, tf, (tf - hf) / hf * 100
    printf "  refcount changes/iteration %.2f; added cost per refcount change %.1f ns\n", rpi, (t - h) / rpi
  }'
done
# In one process, blocks taking turns (the program thread's CPU time).
for i in $(seq "$runs"); do
  LD_PRELOAD="$lib" TPPROF_OUTPUT="$tmp/blocks.db" "$prog" $((iters * 10)) "$elements" 10000 |
    sed 's/.*paired_ratio=//' >> "$tmp/blocks"
done
sort -n "$tmp/blocks" | awk -v runs="$runs" '{v[NR]=$1} END {
  printf "in one process, blocks of 10000 iterations with the observer attached and detached (%d runs):\n", runs
  printf "  with tensors  +%.1f%% over host only (median of the runs; they range +%.1f%% .. +%.1f%%)\n",
    (v[int((NR+1)/2)] - 1) * 100, (v[1] - 1) * 100, (v[NR] - 1) * 100
}'
# The same with the program and tpprof's writer on one CPU: what the
# tracking costs the program's own thread, without the other core's share
# (the ring lines the writer read, taken back for each record).
if command -v taskset >/dev/null; then
  for i in $(seq "$runs"); do
    LD_PRELOAD="$lib" TPPROF_OUTPUT="$tmp/blocks.db" taskset -c 0 "$prog" $((iters * 10)) "$elements" 10000 |
      sed 's/.*paired_ratio=//' >> "$tmp/pinned"
  done
  sort -n "$tmp/pinned" | awk '{v[NR]=$1} END {
    printf "  pinned to one CPU  +%.1f%% (median; +%.1f%% .. +%.1f%%)\n", (v[int((NR+1)/2)] - 1) * 100, (v[1] - 1) * 100, (v[NR] - 1) * 100
  }'
fi
