#!/bin/sh
# bench/real_workloads.sh - tpprof on real programs, against native, heaptrack
# and memray, interleaved in one run.
#
# Usage: bench/real_workloads.sh BUILD_DIR [rounds] [workload...]
# Workloads: torch (bench/torch_mlp.py: a 784-512-10 MLP, 40 steps, CPU,
# one thread; needs Debian's python3-torch) and py (bench/py_alloc.py: pure
# Python, allocation-heavy); default both. Also: loader (bench/torch_loader.py:
# a DataLoader forking 2 workers an epoch, what forked children cost) and
# torchlong (torch_mlp.py for 440 steps instead of 40: `import torch`, which
# makes nearly all of the short run's distinct stacks, a smaller share; the
# difference of the two runs' times is too noisy here to read as the loop's
# own cost). Each round runs, per workload,
# in turn: native, the preload alone (LD_PRELOAD, what the program pays),
# `tpprof run` end to end (recording, symbolizing, the summary), heaptrack
# (heaptrack -r: raw data, not interpreted; when installed) and memray (python3 -m memray run
# --native, when importable), each under /usr/bin/time. Prints the median of
# the per-round ratios to native of wall time, CPU (user+sys, all the
# process's threads) and peak RSS (added MiB), and the load average.
# The interpreter is /usr/bin/python3 (PYTHON= to change it). BASE=BUILD_DIR
# adds that build's preload and `tpprof run` (base-preload, base-run) to
# the rounds: a before/after comparison in one run. BASE_ENV='VAR=value ...'
# sets those for the base runs only (BASE may then be BUILD_DIR itself:
# BASE_ENV=TPPROF_UNWIND=fp+libunwind compares the unwinders in one build).
# A benchmark: it never fails a build.
set -eu
build=$(cd "$1" && pwd)
rounds=${2:-3}
shift; [ $# -gt 0 ] && shift
workloads=${*:-torch py}
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-/usr/bin/python3}
lib="$build/src/tpprof/libtpprof.so"
cli="$build/viewer/tpprof"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tools="native preload run"
[ -n "${BASE:-}" ] && base=$(cd "$BASE" && pwd) && tools="$tools base-preload base-run"
command -v heaptrack > /dev/null && tools="$tools heaptrack"
"$py" -c 'import memray' 2> /dev/null && tools="$tools memray"

script_of() { case $1 in torch|torchlong) echo "$here/torch_mlp.py" ;; py) echo "$here/py_alloc.py" ;; loader) echo "$here/torch_loader.py" ;; *) echo "unknown workload $1" >&2; exit 2 ;; esac; }
args_of() { case $1 in torchlong) echo 440 ;; *) echo ;; esac; }

# One timed run: appends "wall cpu maxrss_kib" to $tmp/$w.$tool.
one() {
  w=$1 tool=$2 s=$(script_of "$1") a=$(args_of "$1")
  rm -rf "$tmp/out" && mkdir "$tmp/out"
  case $tool in
    native) set -- "$py" "$s" $a ;;
    preload) set -- env LD_PRELOAD="$lib" TPPROF_OUTPUT="$tmp/out/p.db" "$py" "$s" $a ;;
    run) set -- "$cli" run -o "$tmp/out/r.db" -- "$py" "$s" $a ;;
    base-preload) set -- env ${BASE_ENV:-} LD_PRELOAD="$base/src/tpprof/libtpprof.so" TPPROF_OUTPUT="$tmp/out/p.db" "$py" "$s" $a ;;
    base-run) set -- env ${BASE_ENV:-} "$base/viewer/tpprof" run -o "$tmp/out/r.db" -- "$py" "$s" $a ;;
    heaptrack) set -- heaptrack -r -o "$tmp/out/h" "$py" "$s" $a ;;
    memray) set -- "$py" -m memray run --native -q -o "$tmp/out/m.bin" "$s" $a ;;
  esac
  /usr/bin/time -f '%e %U %S %M' -o "$tmp/time" "$@" > "$tmp/stdout" 2> "$tmp/stderr" || {
    echo "$w/$tool failed:" >&2; tail -5 "$tmp/stderr" >&2; return 0; }
  awk '{printf "%s %.3f %s\n", $1, $2 + $3, $4}' "$tmp/time" >> "$tmp/$w.$tool"
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$rounds"); do
  for w in $workloads; do
    for t in $tools; do one "$w" "$t"; done
  done
done
echo "load average after:  $(cut -d' ' -f1-3 /proc/loadavg)"

# Median over rounds of each round's ratio (wall, cpu) and RSS difference.
for w in $workloads; do
  echo "== $w ($(basename "$(script_of "$w")")$(a=$(args_of "$w"); [ -n "$a" ] && echo " $a"), $rounds rounds; native: median wall s, cpu s, peak RSS MiB)"
  awk '{print $1}' "$tmp/$w.native" | sort -n | awk '{v[NR]=$1} END {printf "   native       wall %.2f s", v[int((NR+1)/2)]}'
  awk '{print $2}' "$tmp/$w.native" | sort -n | awk '{v[NR]=$1} END {printf "  cpu %.2f s", v[int((NR+1)/2)]}'
  awk '{print $3}' "$tmp/$w.native" | sort -n | awk '{v[NR]=$1} END {printf "  rss %.0f MiB\n", v[int((NR+1)/2)] / 1024}'
  for t in $tools; do
    [ "$t" = native ] && continue
    [ -s "$tmp/$w.$t" ] || { echo "   $t: no run"; continue; }
    paste "$tmp/$w.native" "$tmp/$w.$t" | awk -v t="$t" '
      { wall[NR] = $4 / $1; cpu[NR] = $5 / $2; rss[NR] = ($6 - $3) / 1024 }
      function med(a, n,   i, j, x) {
        for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j > 0 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
        return a[int((n + 1) / 2)]
      }
      END { n = NR; printf "   %-12s wall %.2fx  cpu %.2fx  rss +%.0f MiB\n", t, med(wall, n), med(cpu, n), med(rss, n) }'
  done
done
