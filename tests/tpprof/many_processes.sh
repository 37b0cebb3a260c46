#!/bin/bash
# Many short processes under `tpprof run`, as in a build or a test suite: a
# shell runs /bin/true 50 times. What the run leaves: one recording, every
# process in it (the shell, seq and the 50 trues), each complete, far smaller
# than one file each; `tpprof check` and `report` read it as one program.
# With --keep-processes, one file each, complete, nothing else left (no
# -wal or -shm). The fold starts while the program runs (its file is there
# before the program's end), each process in it once, the launched shell
# first.
# usage: many_processes.sh TPPROF
set -u
tpprof=$(realpath "$1") || exit 1
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
script='for i in $(seq 50); do /bin/true; done'

mkdir "$dir/one" "$dir/each"
# (The trues' recordings are folded as they end: a second later the fold's
# file is there.)
"$tpprof" run -o "$dir/one/loop.db" -- /bin/sh -c "$script; sleep 1; ls '$dir/one' > '$dir/during'" >"$dir/out" 2>"$dir/err" ||
    fail "run: $(cat "$dir/err")"
grep -qx 'loop.db.fold' "$dir/during" || fail "folded while the program ran: $(cat "$dir/during")"
left=$(ls "$dir/one")
[ "$left" = loop.db ] || fail "one file left, got: $left"
grep -q "recordings are folded into $dir/one/loop.db" "$dir/err" || fail "the fold is said: $(cat "$dir/err")"
q() { sqlite3 "$dir/one/loop.db" "$1"; }
trues=$(q "SELECT count(*) FROM processes WHERE exe = '/usr/bin/true'")
[ "$trues" = 50 ] || fail "50 trues in the recording, got $trues"
all=$(q "SELECT count(*) FROM processes")
complete=$(q "SELECT count(*) FROM processes WHERE complete = 1")
[ "$all" -ge 52 ] && [ "$complete" = "$all" ] || fail "$complete of $all processes complete (want the shell, seq and 50 trues)"
pids=$(q "SELECT count(DISTINCT pid) FROM processes")
[ "$pids" = "$all" ] || fail "each process once: $pids pids in $all processes"
first=$(q "SELECT exe FROM processes WHERE id = 1")
[ "$first" = "$(readlink -f /bin/sh)" ] || fail "process 1 is the launched shell, got '$first'"
[ "$(q "SELECT value FROM meta WHERE key = 'pid'")" = "$(q "SELECT pid FROM processes WHERE id = 1")" ] ||
    fail "the recording's pid is the shell's"
one=$(stat -c %s "$dir/one/loop.db")
"$tpprof" check "$dir/one/loop.db" --max-lost-bytes 0 >"$dir/check" 2>&1 || fail "check: $(cat "$dir/check")"
"$tpprof" report "$dir/one/loop.db" >"$dir/report" 2>&1 || fail "report: $(cat "$dir/report")"
grep -q "merged: $all recordings" "$dir/report" || fail "report reads one program of $all: $(head -5 "$dir/report")"

# A process still running after the program (a daemon) stays apart, its
# file whole; the others are folded (some of them while the program ran).
mkdir "$dir/daemon"
"$tpprof" run -o "$dir/daemon/d.db" -- /bin/sh -c 'for i in $(seq 15); do /bin/true; done; sleep 1 &' \
    >"$dir/out" 2>"$dir/err" || fail "run with a daemon: $(cat "$dir/err")"
grep -q "recordings are folded into $dir/daemon/d.db" "$dir/err" || fail "the fold with a daemon: $(cat "$dir/err")"
apart=$(ls "$dir/daemon" | grep -v '^d\.db$' | grep '\.db$' || true)
[ "$(echo "$apart" | grep -c .)" = 1 ] || fail "the daemon's recording apart, got: $(ls "$dir/daemon")"
sleep 2 # (the daemon ends, and closes its recording)
[ "$(sqlite3 "$dir/daemon/$apart" "SELECT value FROM meta WHERE key = 'complete'")" = 1 ] ||
    fail "the daemon's recording, left apart, is whole once it ended"
[ "$(sqlite3 "$dir/daemon/d.db" "SELECT count(*) FROM processes WHERE exe = '/usr/bin/true'")" = 15 ] ||
    fail "the 15 trues folded"

"$tpprof" run --keep-processes -o "$dir/each/loop.db" -- /bin/sh -c "$script" >"$dir/out" 2>"$dir/err" || fail "run: $(cat "$dir/err")"
n=$(ls "$dir/each" | grep -c '\.db$')
[ "$n" -ge 52 ] || fail "one file each: $n"
extra=$(ls "$dir/each" | grep -v '\.db$' || true)
[ -z "$extra" ] || fail "nothing but recordings left (no -wal or -shm): $extra"
total=0 shorts=0
for f in "$dir"/each/*.db; do
    total=$((total + $(stat -c %s "$f")))
    c=$(sqlite3 "$f" "SELECT value FROM meta WHERE key = 'complete'")
    [ "$c" = 1 ] || fail "$f complete: '$c'"
    [ "$(sqlite3 "$f" "SELECT value FROM meta WHERE key = 'exe'")" = /usr/bin/true ] && shorts=$((shorts + 1))
done
[ "$shorts" = 50 ] || fail "50 trues kept apart, got $shorts"
[ $((one * 4)) -lt "$total" ] || fail "the one recording ($one B) is far smaller than the files ($total B)"
echo "ok: $all processes in one recording of $one B; $n files of $total B in all when kept apart"
