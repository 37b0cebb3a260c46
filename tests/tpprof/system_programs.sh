#!/bin/bash
# Common programs of the system, run natively and under the preload: each
# must exit with the same status and print the same output, and leave a
# complete recording. Most are built without frame pointers, through
# libstdc++, libz, libpcre and the rest, which is where the verified
# unwinder learns what it can skip (the SKIPF learning once crashed grep,
# gcc, g++, git and cargo on their first allocations). Programs that are
# not installed are left out; at least 8 must run. (Issue 20 named git,
# sqlite3, gcc, make -j2, node, java -version and python3 with NumPy.)
# usage: system_programs.sh LIBTPPROF
set -u
lib=$(realpath "$1") || exit 1
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
src=$(cd "$(dirname "$0")/../.." && pwd)
printf 'int twice(int x) { return 2 * x; }\n' > "$dir/t.c"
ran=0 bad=0
# check PROGRAM ARGS...: the same status and standard output; with
# stream=2 (check_stderr), the same standard error, tpprof's own lines left
# out (a program printing to stderr: java -version).
stream=1
check() {
    command -v "$1" >/dev/null 2>&1 || return 0
    local nrc trc same
    if [ $stream = 2 ]; then
        (cd "$dir" && exec timeout 60 "$@") 2>"$dir/native.out" >/dev/null
        nrc=$?
        rm -f "$dir"/rec*.db*
        (cd "$dir" && LD_PRELOAD=$lib TPPROF_OUTPUT="$dir/rec.db" exec timeout 120 "$@") 2>"$dir/tpprof.all" >/dev/null
        trc=$?
        grep -v '^tpprof' "$dir/tpprof.all" > "$dir/tpprof.out"
    else
        (cd "$dir" && exec timeout 60 "$@") >"$dir/native.out" 2>/dev/null
        nrc=$?
        rm -f "$dir"/rec*.db*
        (cd "$dir" && LD_PRELOAD=$lib TPPROF_OUTPUT="$dir/rec.db" exec timeout 120 "$@") >"$dir/tpprof.out" 2>/dev/null
        trc=$?
    fi
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
check ls -la "$src/src/tpprof" # (not the root: the suite writes into build/ meanwhile)
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
# Issue 20's real programs: git on a repository, a nonzero status, make -j2
# running the compiler, node, the JVM, NumPy.
if command -v git >/dev/null 2>&1; then
    git init -q "$dir/repo" && printf 'x\n' > "$dir/repo/f" &&
        git -C "$dir/repo" add f && git -C "$dir/repo" -c user.name=t -c user.email=t@t commit -q -m first &&
        check git -C "$dir/repo" log --format='%s %T'
    check git -C "$dir/no-such-repo" status
fi
check sqlite3 :memory: 'SELECT nosuch'
printf 'all: a.o b.o\n%%.o: %%.c\n\tcc -O2 -c $< -o $@\n' > "$dir/Makefile"
printf 'int a(void) { return 1; }\n' > "$dir/a.c"
printf 'int b(void) { return 2; }\n' > "$dir/b.c"
command -v cc >/dev/null 2>&1 && check make -s -B -j2 -C "$dir"
check node -e 'const m = new Map(); for (let i = 0; i < 50000; i++) m.set("k" + i, [i]); console.log(m.size)'
stream=2 check java -version
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import numpy' 2>/dev/null &&
    check /usr/bin/python3 -c 'import numpy as np; a = np.arange(100000.0); print(float((a * a).sum()))'
echo "$ran ran, $bad failed"
[ "$ran" -ge 8 ] || { echo "too few of the programs are installed"; exit 1; }
[ "$bad" -eq 0 ]
