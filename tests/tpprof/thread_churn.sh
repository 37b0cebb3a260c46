#!/bin/bash
# A program that runs a short thread per task keeps tpprof's memory flat:
# a gone thread's struct and ring serve the next new thread. churn N runs
# N one-allocation threads one after another and prints its resident
# memory (printed here, not asserted: it moves by a few MiB between runs;
# 1,500 -> 6,000 threads measured +0.2 MiB, and +2.4 MiB, about 0.5 KiB a
# thread, before structs were reused). Asserted: every thread still has its
# row in the threads table, and the rings mapped (meta.rings) number at most
# 1,500 for 6,000 threads run one at a time (one per thread before). A ring
# is reused once the writer has drained it, so how many are mapped depends
# on how far the writer lags: 47-210 on an idle machine, up to 769 seen
# on 2 cores at load 10-15; the bound is a quarter of the threads.
# usage: thread_churn.sh LIBTPPROF CHURN
set -u
lib=$(realpath "$1") prog=$(realpath "$2") || exit 1
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
rss() {
    rm -f "$dir"/c.db*
    LD_PRELOAD=$lib TPPROF_OUTPUT="$dir/c.db" "$prog" "$1" | sed -n 's/^rss_kb=//p'
}
small=$(rss 1500)
rows_small=$(sqlite3 "$dir/c.db" "SELECT count(*) FROM threads")
big=$(rss 6000)
rows_big=$(sqlite3 "$dir/c.db" "SELECT count(*) FROM threads")
echo "1500 threads: ${small} KiB resident, $rows_small thread rows; 6000 threads: ${big} KiB, $rows_big rows"
[ -n "$small" ] && [ -n "$big" ] || { echo "FAIL: no rss_kb line"; exit 1; }
[ "$rows_small" = 1501 ] && [ "$rows_big" = 6001 ] || { echo "FAIL: every thread (and main) has its row"; exit 1; }
rings=$(sqlite3 "$dir/c.db" "SELECT value FROM meta WHERE key = 'rings'")
[ -n "$rings" ] && [ "$rings" -le 1500 ] || { echo "FAIL: $rings rings mapped for 6000 threads run one at a time"; exit 1; }
echo "ok: grew $((big - small)) KiB for 4500 more threads; $rings rings mapped for 6000 threads"
