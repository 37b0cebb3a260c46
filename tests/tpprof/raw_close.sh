#!/bin/bash
# A program that closes the recorder's descriptors with the raw close system
# call and then opens files of its own on every number (rawcloser.c) must
# keep its files exactly as it wrote them: the recorder stops writing, says
# so in one line on the program's stderr, and leaves a recording that does
# not claim to be complete. Under load the recorder's write could fall after
# the close: libunwind's validation pipe (moved to tpprof's numbers) was
# written into the program's file on its number; the recorder now stops at
# the program's first open that returns one of its numbers.
# usage: raw_close.sh LIBTPPROF RAWCLOSER
set -u
lib=$(realpath "$1") prog=$(realpath "$2") || exit 1
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
bad=0
for i in 1 2 3; do
    rm -rf "$dir/files" "$dir"/r.db*
    mkdir "$dir/files"
    (ulimit -n 2048 && LD_PRELOAD=$lib TPPROF_OUTPUT="$dir/r.db" exec "$prog" "$dir/files") >"$dir/out" 2>"$dir/err"
    st=$?
    lines=$(grep -c '^tpprof: ' "$dir/err")
    complete=$(sqlite3 "$dir/r.db" "SELECT value FROM meta WHERE key = 'complete'" 2>/dev/null)
    if [ $st -ne 0 ] || ! grep -q '^rawcloser ok' "$dir/out"; then
        echo "FAIL: run $i: status $st, stdout: $(cat "$dir/out")"; bad=$((bad + 1))
    elif [ "$lines" != 1 ] || ! grep -q 'closed its descriptor .* raw close system call' "$dir/err"; then
        echo "FAIL: run $i: want one line about the raw close on stderr, got:"; cat "$dir/err"; bad=$((bad + 1))
    elif [ "$complete" = 1 ]; then
        echo "FAIL: run $i: the recording says complete"; bad=$((bad + 1))
    else
        echo "ok: run $i: $(cat "$dir/out"), one line: $(cat "$dir/err")"
    fi
done
[ $bad -eq 0 ]
