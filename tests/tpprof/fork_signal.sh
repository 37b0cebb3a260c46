#!/bin/sh
# fork_signal.sh PRELOAD FORKSIG: a program whose signal handler calls _exit
# signals its forked children a little after each fork (progs/forksig.c):
# under the preload every child ends by its handler, as natively, and none
# hangs. (The signal used to land while the preload's fork handler held the
# writer's lock, and the child's _exit then waited for that lock for ever:
# 12 children of 30.) Each child that ended leaves a complete recording.
set -eu
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
lib=$(abs "$1") prog=$(abs "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
native=$("$prog" 30)
[ "$native" = "rounds=30 exited7=30 hung=0" ] || { echo "natively: $native"; exit 77; }
got=$(cd "$tmp" && LD_PRELOAD=$lib TPPROF_OUTPUT=$tmp/f.db "$prog" 30)
if [ "$got" != "$native" ]; then
  echo "under the preload: $got (natively: $native)"; exit 1
fi
n=0
for f in "$tmp"/f.*.db; do
  c=$(sqlite3 "$f" "SELECT value FROM meta WHERE key = 'complete'" 2> /dev/null || echo "?")
  [ "$c" = 1 ] || { echo "$f: complete is '$c'"; exit 1; }
  n=$((n + 1))
done
[ "$n" -eq 30 ] || { echo "$n child recordings, not 30"; exit 1; }
echo ok
