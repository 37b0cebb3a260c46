#!/bin/bash
# The recorder, preloaded by hand, never destroys what TPPROF_OUTPUT names
# when it is not a tpprof recording: a text file, a database of the user's,
# a directory (and their -wal/-shm/-journal neighbours) are left as they
# are; the program runs as usual and one line says nothing was recorded.
# An earlier recording, or an empty file, is replaced.
# usage: output_not_ours.sh LIBTPPROF PROG
set -u
lib=$(realpath "$1") prog=$(realpath "$2") || exit 1
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
bad=0
rec() { LD_PRELOAD=$lib TPPROF_OUTPUT="$1" "$prog" >/dev/null 2>"$dir/err"; }
echo notes >"$dir/notes.txt"; echo wal >"$dir/notes.txt-wal"
rec "$dir/notes.txt"; st=$?
if [ $st -ne 0 ] || [ "$(cat "$dir/notes.txt")" != notes ] || [ "$(cat "$dir/notes.txt-wal")" != wal ] ||
   [ "$(grep -c 'is not a tpprof recording' "$dir/err")" != 1 ]; then
    echo "FAIL: a text file: status $st, now '$(head -c 40 "$dir/notes.txt")', stderr: $(cat "$dir/err")"; bad=$((bad + 1))
else echo "ok: a text file is left as it is"; fi
sqlite3 "$dir/user.db" "CREATE TABLE t(x); INSERT INTO t VALUES(42)"
rec "$dir/user.db"
if [ "$(sqlite3 "$dir/user.db" 'SELECT x FROM t' 2>&1)" != 42 ]; then
    echo "FAIL: the user's database was touched"; bad=$((bad + 1))
else echo "ok: a database of the user's is left as it is"; fi
mkdir "$dir/adir"
rec "$dir/adir"
if [ ! -d "$dir/adir" ] || ! grep -q 'is not a tpprof recording' "$dir/err"; then
    echo "FAIL: a directory: $(cat "$dir/err")"; bad=$((bad + 1))
else echo "ok: a directory is refused"; fi
: >"$dir/empty.db"
rec "$dir/empty.db"; rec "$dir/empty.db"
if [ "$(sqlite3 "$dir/empty.db" "SELECT value FROM meta WHERE key = 'complete'" 2>&1)" != 1 ] || [ -s "$dir/err" ]; then
    echo "FAIL: an empty file, then a recording, are not replaced: $(cat "$dir/err")"; bad=$((bad + 1))
else echo "ok: an empty file and an earlier recording are replaced"; fi
[ $bad -eq 0 ]
