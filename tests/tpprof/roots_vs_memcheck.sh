#!/bin/bash
# The leak scan's verdicts against memcheck's: one program of progs/ built six
# ways (-O0, -O1, -O2; with and without frame pointers), each run under
# memcheck and under the preload. What memcheck calls definitely or
# indirectly lost (bytes and blocks) must be exactly what tpprof calls lost
# (reachability 1) among heap blocks; memcheck does not see mappings, so
# they are left out. Stale copies of pointers (registers spilled by the
# recorder's own frames, an uninitialized array in the exit path) and roots
# that cannot be read make the two disagree.
# Programs whose verdicts memcheck itself changes are not for this test:
# streams.c (memcheck's __libc_freeres closes every FILE, so a buffer the
# program gave setvbuf becomes lost), forker.c (the child's recording).
# usage: roots_vs_memcheck.sh LIBTPPROF PROG.c [ARGS...]; skips (77) without
# valgrind or a C compiler.
set -u
lib=$(realpath "$1") || exit 1
src=$(realpath "$2") || exit 1
shift 2
command -v valgrind >/dev/null || { echo "SKIP: valgrind not installed"; exit 77; }
cc=${CC:-cc}
command -v "$cc" >/dev/null || { echo "SKIP: no C compiler"; exit 77; }
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
bad=0 ran=0
for opt in -O0 -O1 -O2; do
    for fp in -fno-omit-frame-pointer -fomit-frame-pointer; do
        how="$(basename "$src") $opt $fp"
        if ! "$cc" $opt $fp -g -pthread -o "$dir/p" "$src" -ldl 2>"$dir/cc.err"; then
            echo "FAIL: $how does not build:"; cat "$dir/cc.err"; bad=$((bad + 1)); continue
        fi
        # memcheck's summary lines: "definitely lost: 1,024 bytes in 1 blocks"
        vg=$(cd "$dir" && valgrind --leak-check=full ./p "$@" 2>&1 >/dev/null |
             awk '/definitely lost:|indirectly lost:/ { gsub(",", "", $4); gsub(",", "", $7); b += $4; n += $7 }
                  END { print b + 0, n + 0 }')
        rm -f "$dir"/t.db*
        (cd "$dir" && LD_PRELOAD=$lib TPPROF_OUTPUT="$dir/t.db" exec ./p "$@") >/dev/null 2>"$dir/tp.err"
        tp=$(sqlite3 "$dir/t.db" "SELECT coalesce(sum(b.size), 0) || ' ' || count(*) FROM live_blocks b
                                  JOIN kinds k ON k.id = b.kind
                                  WHERE b.reachability = 1 AND k.name NOT LIKE 'mmap%'" 2>&1)
        ran=$((ran + 1))
        if [ "$vg" != "$tp" ]; then
            echo "FAIL: $how: memcheck lost '$vg' (bytes blocks), tpprof lost '$tp'"
            sqlite3 "$dir/t.db" "SELECT size, reachability, kind FROM live_blocks" 2>/dev/null | head -20
            bad=$((bad + 1))
        else
            echo "ok: $how: lost $tp (bytes blocks), as memcheck"
        fi
    done
done
echo "$ran builds, $bad disagree"
[ "$bad" -eq 0 ]
