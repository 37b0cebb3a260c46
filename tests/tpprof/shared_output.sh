#!/bin/bash
# Several unrelated processes (not started by a recorded one) given the same
# TPPROF_OUTPUT, all recording at once: the commands of a pipeline run with
# an exported LD_PRELOAD. None may replace another's recording while it is
# being written: the first takes the name, each other one its pid too, and
# says so on stderr; every recording is complete and holds its own process's
# lost block.
# usage: shared_output.sh LIBTPPROF BESIDE
set -u
lib=$(realpath "$1") || exit 1
prog=$(realpath "$2") || exit 1
command -v sqlite3 > /dev/null || { echo "SKIP: no sqlite3"; exit 77; }
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
n=4
pids=()
for k in $(seq 1 $n); do
    LD_PRELOAD=$lib TPPROF_OUTPUT="$dir/run.db" "$prog" $((1000 + k)) "$dir/go" > "$dir/out.$k" 2> "$dir/err.$k" &
    pids+=($!)
done
# Every process recording (its file exists) before any may end.
for i in $(seq 1 500); do
    [ "$(ls "$dir" | grep -c '^run.*\.db$')" -ge $n ] && break
    sleep 0.01
done
touch "$dir/go"
bad=0
for k in $(seq 1 $n); do
    wait "${pids[$((k - 1))]}" || { echo "FAIL: process $k exited $?"; bad=1; }
    grep -q "beside $((1000 + k)): done" "$dir/out.$k" || { echo "FAIL: process $k's output: $(cat "$dir/out.$k")"; bad=1; }
done
files=$(ls "$dir" | grep '^run.*\.db$' | sort)
echo "recordings: $(echo $files)"
[ "$(echo "$files" | wc -l)" -eq $n ] || { echo "FAIL: $n processes, $(echo "$files" | wc -l) recordings"; bad=1; }
said=$(cat "$dir"/err.* | grep -c "is being recorded by another process; this one records to")
[ "$said" -eq $((n - 1)) ] || { echo "FAIL: $said processes said they took another name (want $((n - 1)))"; cat "$dir"/err.*; bad=1; }
seen=""
for f in $files; do
    row=$(sqlite3 "$dir/$f" "SELECT (SELECT value FROM meta WHERE key = 'complete') || ' ' ||
                                   (SELECT group_concat(size) FROM live_blocks WHERE reachability = 1 AND size > 1000 AND size <= $((1000 + n)))" 2>&1)
    echo "$f: complete, lost sizes: $row"
    case $row in
    "1 100"[1-9]) seen="$seen ${row#1 }" ;;
    *) echo "FAIL: $f is not one complete recording with its process's lost block"; bad=1 ;;
    esac
done
[ "$(echo $seen | tr ' ' '\n' | sort -u | wc -l)" -eq $n ] || { echo "FAIL: lost blocks$seen: not one per process"; bad=1; }
[ $bad -eq 0 ] && echo "ok: $n processes beside each other, $n recordings"
exit $bad
