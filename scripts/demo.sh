#!/usr/bin/env bash
# README command (1): install what is missing, build, then profile the sample
# tensor workload (samples/mlp) under tpprof and print its report.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
[ -f build/build.ninja ] || meson setup build
ninja -C build

db=tpprof-demo.db
rm -f "$db"
build/viewer/tpprof run -o "$db" -- build/samples/mlp
build/viewer/tpprof report "$db" --top 5
