#!/bin/sh
# README command (1)'s main job, as a test: profile samples/mlp under
# `tpprof run` and print its report.  The program must succeed under the
# preload (it exits 1 if its loss does not fall), the recording must be
# complete, and the report must show the summary, the top sites and the
# tensor storages section (tpprof attached to the runtime).
# usage: demo_smoke.sh TPPROF MLP
set -u
tpprof=$1 mlp=$2
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
"$tpprof" run -o "$dir/demo.db" -- "$mlp" >"$dir/run.out" 2>"$dir/run.err" || {
    echo "tpprof run failed:"; cat "$dir/run.err"; exit 1; }
grep -q '^tpprof: tensors: 0 storages alive at exit' "$dir/run.err" || {
    echo "no tensor summary line (runtime not attached?):"; cat "$dir/run.err"; exit 1; }
"$tpprof" report "$dir/demo.db" --top 5 --storages >"$dir/report.txt" || exit 1
for want in ', complete' 'Top 5 sites by bytes allocated' '< train_step (mlp.c:' \
            'Storages alive at exit: 0 holding 0 B'; do
    grep -qF -- "$want" "$dir/report.txt" || { echo "report lacks '$want':"; cat "$dir/report.txt"; exit 1; }
done
echo ok
