#!/bin/bash
# kill -9 anywhere in a run never passes the gate: keeper (100,000 kept
# blocks, one lost) is killed at spread-out moments from its start to past
# its end, its final write included. Whatever the moment, either it ended
# first (status 0: check passes a gate its leak fits) or it was killed
# (status 137) and `tpprof check` with the same gate fails (exit 1) saying
# the recording cannot be vouched for. Never a pass for a killed run, never
# an unreadable file reported as fine.
# usage: kill9.sh TPPROF LIBTPPROF KEEPER
set -u
tpprof=$(realpath "$1") lib=$(realpath "$2") prog=$(realpath "$3") || exit 1
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
gate=(--max-lost-bytes 100000)
run_once() { # delay_ms|none -> status
    rm -f "$dir"/k.db*
    LD_PRELOAD=$lib TPPROF_OUTPUT="$dir/k.db" "$prog" 100000 >/dev/null &
    local pid=$!
    if [ "$1" != none ]; then sleep "$(printf '0.%03d' "$1")"; kill -9 $pid 2>/dev/null; fi
    wait $pid
}
start=$(date +%s%N)
run_once none
st=$?
total_ms=$(( ($(date +%s%N) - start) / 1000000 ))
"$tpprof" check "$dir/k.db" "${gate[@]}" >"$dir/out" 2>&1
cst=$?
if [ $st -ne 0 ] || [ $cst -ne 0 ]; then
    echo "FAIL: the run without a kill: status $st, check:"; cat "$dir/out"; exit 1
fi
echo "ok: unkilled run took $total_ms ms and passes the gate"
[ $total_ms -gt 999 ] && total_ms=999
bad=0 killed=0
for i in $(seq 0 11); do
    delay=$(( total_ms * i / 10 ))
    [ $delay -gt 999 ] && delay=999
    run_once $delay
    st=$?
    "$tpprof" check "$dir/k.db" "${gate[@]}" >"$dir/out" 2>&1
    cst=$?
    end=$(sqlite3 "$dir/k.db" "SELECT group_concat(value, ' ') FROM (SELECT value FROM meta WHERE key IN
                                ('complete', 'end_reason') ORDER BY key)" 2>/dev/null)
    if [ $st -eq 137 ] && [ $cst -eq 0 ] && [ "$end" = "1 exit" ]; then
        # Killed after exit's final write was committed: the recording is
        # whole, and says the program ended by exit (its status says the kill).
        echo "ok: killed at $delay ms, after the final write: check passes a whole recording"
    elif [ $st -eq 137 ]; then
        killed=$((killed + 1))
        # (Killed before the recorder made its file, or while it wrote the
        # empty recording's copy into it: no recording, or a truncated one,
        # exit 2.)
        if { [ $cst -ne 1 ] && ! { [ $cst -eq 2 ] && { [ ! -s "$dir/k.db" ] || grep -q "is truncated" "$dir/out"; }; }; } ||
           ! grep -q "cannot be vouched for\|cannot read\|cannot open\|not a tpprof recording\|nothing was recorded\|No such file\|is truncated" "$dir/out"; then
            echo "FAIL: killed at $delay ms: check exits $cst:"; cat "$dir/out"; bad=$((bad + 1))
        else
            echo "ok: killed at $delay ms: check exits $cst: $(head -1 "$dir/out")"
        fi
    elif [ $st -eq 0 ] && [ $cst -eq 0 ]; then
        echo "ok: ended before the kill at $delay ms: check passes"
    else
        echo "FAIL: kill at $delay ms: status $st, check exits $cst:"; cat "$dir/out"; bad=$((bad + 1))
    fi
done
[ $killed -ge 3 ] || { echo "FAIL: only $killed of 12 runs were killed before they ended"; bad=$((bad + 1)); }
[ $bad -eq 0 ]
