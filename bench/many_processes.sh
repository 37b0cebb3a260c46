#!/bin/bash
# bench/many_processes.sh - many short processes under tpprof, as in a build
# or a test suite: what each process pays for being recorded, and what the
# run leaves on disk.
#
# Usage: bash bench/many_processes.sh BUILD_DIR [files] [rounds] [LIBTPPROF]
#
# 1. The fixed cost per process: /bin/true and `gcc -c` of one small file,
#    native and under the preload (LD_PRELOAD, TPPROF_OUTPUT), 40 runs each,
#    interleaved; prints the mean wall and CPU (user + system, children
#    included) per process of each and their difference.
# 2. A build: `files` generated C files (default 40) and a main, compiled
#    and linked by `ninja -j2` natively and under `tpprof run`, in turns,
#    `rounds` times (default 3); prints each round's times and ratio, the
#    median ratio, the processes recorded, the overhead per process, and the
#    files and bytes the run left (all recordings, and the run's one
#    recording after `tpprof run` folded them).
# LIBTPPROF (default BUILD_DIR/src/tpprof/libtpprof.so) compares another
# recorder in part 1 (a build of the recorder before a change, say); part 2
# always runs BUILD_DIR's `tpprof run`, which finds its own preload.
# Timings on a shared machine: read them with the load average it prints.
# A benchmark: it never fails a build.
set -eu
build=$(cd "$1" && pwd)
files=${2:-40}
rounds=${3:-3}
lib=${4:-$build/src/tpprof/libtpprof.so}
tpprof=$build/viewer/tpprof
command -v ninja >/dev/null || { echo "needs ninja"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

now() { date +%s%N; }

# --- 1. fixed cost per process -------------------------------------------
cat > "$tmp/small.c" <<'EOF'
#include <stdlib.h>
int small(int n) { int *p = malloc(sizeof *p * (size_t)n); int s = 0; for (int i = 0; i < n; i++) s += p[i] = i; free(p); return s; }
EOF
per_process() { # label, command... -> "label wall_ns cpu_ns" per run
  label=$1; shift
  local TIMEFORMAT='%R %U %S' t
  t=$( { time (i=0; while [ $i -lt 40 ]; do "$@" >/dev/null 2>&1; i=$((i + 1)); done) ; } 2>&1 )
  echo "$label $t" | awk '{ printf "%s %.0f %.0f\n", $1, $2 * 1e9 / 40, ($3 + $4) * 1e9 / 40 }'
}
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in 1 2; do
  per_process true_native /bin/true
  per_process true_preload env LD_PRELOAD="$lib" TPPROF_OUTPUT="$tmp/t.db" /bin/true
  per_process gcc_native gcc -c "$tmp/small.c" -o "$tmp/small.o"
  per_process gcc_preload env LD_PRELOAD="$lib" TPPROF_OUTPUT="$tmp/g.db" gcc -c "$tmp/small.c" -o "$tmp/small.o"
done | awk '
  { wall[$1] += $2; cpu[$1] += $3; n[$1]++ }
  END {
    split("true gcc", names, " ")
    for (k = 1; k <= 2; k++) {
      a = names[k] "_native"; b = names[k] "_preload"
      printf "%-5s native %6.2f ms wall %6.2f ms cpu; preload %6.2f ms wall %6.2f ms cpu; per process +%.2f ms wall +%.2f ms cpu\n",
        names[k], wall[a] / n[a] / 1e6, cpu[a] / n[a] / 1e6, wall[b] / n[b] / 1e6, cpu[b] / n[b] / 1e6,
        (wall[b] / n[b] - wall[a] / n[a]) / 1e6, (cpu[b] / n[b] - cpu[a] / n[a]) / 1e6
    }
  }'
rm -f "$tmp"/t*.db* "$tmp"/g*.db*

# --- 2. a build ------------------------------------------------------------
src=$tmp/src
mkdir -p "$src"
i=1
while [ $i -le "$files" ]; do
  cat > "$src/f$i.c" <<EOF
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
struct item { int key; char name[32]; struct item *next; };
static struct item *push(struct item *head, int key) {
    struct item *n = malloc(sizeof *n);
    if (!n) return head;
    n->key = key;
    snprintf(n->name, sizeof n->name, "item%d", key);
    n->next = head;
    return n;
}
int work$i(int n) {
    struct item *h = NULL;
    int sum = 0;
    for (int k = 0; k < n; k++) h = push(h, k);
    while (h) { struct item *next = h->next; sum += h->key + (int)strlen(h->name); free(h); h = next; }
    return sum;
}
EOF
  i=$((i + 1))
done
{
  echo 'int main(void) { int s = 0;'
  i=1; while [ $i -le "$files" ]; do echo "  extern int work$i(int); s += work$i($i);"; i=$((i + 1)); done
  echo '  return s == 0; }'
} > "$src/main.c"
{
  printf 'rule cc\n  command = gcc -O2 -c $in -o $out\nrule link\n  command = gcc $in -o $out\n'
  objs=""
  for f in main $(i=1; while [ $i -le "$files" ]; do echo f$i; i=$((i + 1)); done); do
    echo "build $f.o: cc $f.c"; objs="$objs $f.o"
  done
  echo "build prog: link$objs"
} > "$src/build.ninja"

out=$tmp/out
ratios=""
for round in $(seq "$rounds"); do
  (cd "$src" && ninja -t clean >/dev/null)
  t0=$(now); (cd "$src" && ninja -j2 >/dev/null); t1=$(now)
  (cd "$src" && ninja -t clean >/dev/null)
  rm -rf "$out"; mkdir -p "$out"
  t2=$(now); (cd "$src" && "$tpprof" run -o "$out/build.db" -- ninja -j2 >/dev/null 2>"$tmp/run.err"); t3=$(now)
  native=$(( (t1 - t0) / 1000000 )); traced=$(( (t3 - t2) / 1000000 ))
  ratio=$(awk -v a="$traced" -v b="$native" 'BEGIN { printf "%.2f", a / b }')
  ratios="$ratios $ratio"
  echo "round $round: native $native ms, tpprof run $traced ms, ratio ${ratio}x (load $(cut -d' ' -f1 /proc/loadavg))"
done
procs=$(grep -o 'one recording of [0-9]* processes' "$tmp/run.err" | grep -o '[0-9][0-9]*' || true)
[ -n "$procs" ] || procs=$(ls "$out" | grep -c '\.db$' || true)
echo "median ratio: $(echo $ratios | tr ' ' '\n' | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')x over $rounds rounds"
echo "processes recorded: $procs; overhead per process: $(awk -v a="$traced" -v b="$native" -v n="$procs" 'BEGIN { printf "%.1f", (a - b) / (n ? n : 1) }') ms (last round)"
echo "left: $(ls "$out" | wc -l) files, $(du -sk "$out" | cut -f1) KiB in $out"
tail -3 "$tmp/run.err"
