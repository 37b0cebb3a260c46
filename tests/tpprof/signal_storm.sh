#!/bin/bash
# A recording ended by a signal survives more of the same signal while it
# is written: `timeout -s TERM` signals the process group and `tpprof run`
# forwards it (two TERMs), and a storm of them from a shell loop. Each run
# of sigstorm (four threads allocating, 4000 blocks of 300 B live) must
# leave a complete recording ended by signal 15 with its live set, and die
# of SIGTERM (status 143; 124 from timeout). Before the stand-in handler
# stayed installed during the write, most storms left it incomplete.
# usage: signal_storm.sh TPPROF LIBTPPROF SIGSTORM
set -u
tpprof=$(realpath "$1") lib=$(realpath "$2") prog=$(realpath "$3") || exit 1
dir=$(mktemp -d) || exit 1
# Only the script itself cleans up: a subshell it forks (the storm loop, or a
# background job between fork and exec) inherits this trap, and one ended by
# a TERM of the storm runs it (bash does), removing the directory mid-run.
trap '[ "$BASHPID" = "$$" ] && rm -rf "$dir"' EXIT
bad=0
verdict() { # how db status want_status
    local got live
    got=$(sqlite3 "$2" "SELECT group_concat(key || '=' || value, ' ') FROM (SELECT key, value FROM meta
                        WHERE key IN ('complete', 'end_reason', 'end_signal') ORDER BY key)" 2>&1)
    live=$(sqlite3 "$2" "SELECT count(*) FROM live_blocks WHERE size = 300" 2>&1)
    if [ "$got" != "complete=1 end_reason=signal end_signal=15" ] || [ "$3" != "$4" ] || ! [ "$live" -ge 3900 ] 2>/dev/null; then
        echo "FAIL: $1: status $3 (want $4), meta '$got', $live live blocks of 300 B"
        bad=$((bad + 1))
    else
        echo "ok: $1: status $3, $got, $live live"
    fi
}
for i in 1 2 3 4 5; do
    # (out too: a "ready" left by the last storm, read before the new job
    # truncates it, sent this storm into the job before its exec.)
    rm -f "$dir"/s.db* "$dir/out"
    LD_PRELOAD=$lib TPPROF_OUTPUT="$dir/s.db" "$prog" >"$dir/out" &
    pid=$!
    for _ in $(seq 100); do grep -q ready "$dir/out" && break; sleep 0.05; done
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -TERM $pid 2>/dev/null; done
    (for _ in $(seq 50); do kill -TERM $pid 2>/dev/null || break; sleep 0.01; done) &
    wait $pid
    st=$?
    wait
    verdict "storm $i" "$dir/s.db" $st 143
done
for i in 1 2 3; do
    rm -f "$dir"/t.db*
    timeout -s TERM 1 "$tpprof" run -o "$dir/t.db" -- "$prog" >/dev/null 2>"$dir/err"
    verdict "timeout $i" "$dir/t.db" $? 124
done
[ $bad -eq 0 ]
