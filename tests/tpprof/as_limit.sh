#!/bin/bash
# Under an address-space limit (prlimit --as, as batch schedulers set), the
# recorder must not take what the program needs: asthreads (200 threads of
# 64 KiB stacks alive at once; two malloc arenas, MALLOC_ARENA_MAX=2, so the
# program's own need is steady) runs natively under 400 MiB, and must run
# the same under the preload, every thread recorded. With 2 MiB rings
# (400 MiB for 200 threads) its pthread_create failed at thread 147.
# usage: as_limit.sh LIBTPPROF ASTHREADS
set -u
lib=$(realpath "$1") prog=$(realpath "$2") || exit 1
command -v prlimit >/dev/null || { echo "SKIP: no prlimit"; exit 77; }
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
limit=$((400 * 1024 * 1024))
export MALLOC_ARENA_MAX=2
native=$(prlimit --as=$limit "$prog" 200)
[ "$native" = "asthreads ok" ] || { echo "SKIP: natively under 400 MiB: $native"; exit 77; }
out=$(prlimit --as=$limit env LD_PRELOAD="$lib" TPPROF_OUTPUT="$dir/a.db" "$prog" 200)
meta=$(sqlite3 "$dir/a.db" "SELECT group_concat(key || '=' || value, ' ') FROM (SELECT key, value FROM meta
                            WHERE key IN ('complete', 'threads_unrecorded', 'events_unrecorded') ORDER BY key)" 2>&1)
echo "under the preload: $out; $meta"
[ "$out" = "asthreads ok" ] || { echo "FAIL: the program behaves differently under the preload"; exit 1; }
[ "$meta" = "complete=1 events_unrecorded=0 threads_unrecorded=0" ] || { echo "FAIL: not every thread recorded"; exit 1; }
echo ok
