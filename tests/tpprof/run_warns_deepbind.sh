#!/bin/sh
# run_warns_deepbind.sh TPPROF HOST PLUGIN: `tpprof run` names, in its
# summary, a library that called the C library's allocator directly (loaded
# with RTLD_DEEPBIND), and names none when the same plugin is loaded plainly.
set -eu
tpprof=$1 host=$2 plugin=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$tpprof" run -o "$tmp/deep.db" -- "$host" "$plugin" deep >"$tmp/out" 2>"$tmp/err"
if ! grep -q "^tpprof: warning: .*libtpprof_plugin.so called the C library's allocator directly" "$tmp/err"; then
  echo "no warning for the RTLD_DEEPBIND plugin:"; cat "$tmp/err"; exit 1
fi
"$tpprof" run -o "$tmp/plain.db" -- "$host" "$plugin" >"$tmp/out" 2>"$tmp/err"
if grep -q "allocator directly" "$tmp/err"; then
  echo "a warning for the plainly loaded plugin:"; cat "$tmp/err"; exit 1
fi
echo "ok"
