#!/bin/bash
# Common programs of the system, run natively and under the preload: each
# must exit with the same status and print the same output, and leave a
# complete recording. Most are built without frame pointers, through
# libstdc++, libz, libpcre and the rest, which is where the verified
# unwinder learns what it can skip (the SKIPF learning once crashed grep,
# gcc, g++, git and cargo on their first allocations). Programs that are
# not installed are left out; at least 8 must run.
# usage: system_programs.sh LIBTPPROF
set -u
lib=$(realpath "$1") || exit 1
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
src=$(cd "$(dirname "$0")/../.." && pwd)
printf 'int twice(int x) { return 2 * x; }\n' > "$dir/t.c"
ran=0 bad=0
check() {
    command -v "$1" >/dev/null 2>&1 || return 0
    local nrc trc same
    (cd "$dir" && exec timeout 60 "$@") >"$dir/native.out" 2>/dev/null
    nrc=$?
    rm -f "$dir"/rec*.db*
    (cd "$dir" && LD_PRELOAD=$lib TPPROF_OUTPUT="$dir/rec.db" exec timeout 120 "$@") >"$dir/tpprof.out" 2>/dev/null
    trc=$?
    ran=$((ran + 1))
    cmp -s "$dir/native.out" "$dir/tpprof.out" && same=same || same=differs
    if [ "$nrc" != "$trc" ] || [ "$same" != same ]; then
        echo "FAIL: $* (status $nrc natively, $trc under tpprof; output $same)"
        bad=$((bad + 1))
    elif [ "$(sqlite3 "$dir/rec.db" "SELECT value FROM meta WHERE key = 'complete'" 2>/dev/null)" != 1 ]; then
        echo "FAIL: $*: the recording is not complete"
        bad=$((bad + 1))
    else
        echo "ok: $*"
    fi
}
check grep -c the "$src/README.md"
check sed -n '1,40p' "$src/README.md"
check sort "$src/README.md"
check awk '{n += length($0)} END {print n}' "$src/README.md"
check find "$src/src" -name '*.c'
check ls -la "$src"
check gzip -c "$src/README.md"
check xz -c "$src/README.md"
check tar cf - -C "$src" README.md
check bash -c 'for i in $(seq 200); do echo $i; done | wc -l'
check perl -e 'my %h; $h{$_} = "x" x 10 for 1..20000; print scalar(keys %h), "\n"'
check python3 -c 'import json, re; print(len(json.dumps({str(i): [i] * 3 for i in range(20000)})))'
check sqlite3 :memory: 'CREATE TABLE t(x); INSERT INTO t VALUES (1), (2); SELECT sum(x) FROM t'
check gcc -O2 -c t.c -o t.o
check g++ -O2 -c -x c++ t.c -o t2.o
check git --version
check readelf -h /bin/ls
echo "$ran ran, $bad failed"
[ "$ran" -ge 8 ] || { echo "too few of the programs are installed"; exit 1; }
[ "$bad" -eq 0 ]
