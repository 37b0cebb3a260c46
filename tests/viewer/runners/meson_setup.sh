#!/bin/sh
# meson_setup.sh: docs/test-runners.md's Meson test setup, for real. A tiny
# Meson project (made in a temporary directory) with a leaking C test runs
# `meson test --setup tpprof`: the test must fail because of the leak (tpprof
# exits 99 and says which gate), pass without the setup, and pass under the
# setup once the leak is fixed (-Dfixed=true flips a define).
#
# usage: meson_setup.sh TPPROF        exit 77 (skip) without meson or ninja
set -u
tpprof=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
for tool in meson ninja cc; do
    command -v "$tool" >/dev/null 2>&1 || { echo "SKIP: $tool not found"; exit 77; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tpprof-meson-XXXXXX") || exit 1
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

mkdir "$tmp/src"
# The setup as docs/test-runners.md has it (tpprof found on PATH).
cat > "$tmp/src/meson.build" <<'MESON'
project('leaky', 'c')
tpprof = find_program('tpprof', required : false)
if tpprof.found()
  add_test_setup('tpprof',
    exe_wrapper : [tpprof, 'run', '--error-exitcode', '99', '--max-lost-bytes', '0', '--'],
    timeout_multiplier : 3)
endif
exe = executable('leaky', 'leaky.c',
  c_args : get_option('fixed') ? ['-DFIXED'] : [])
test('leaky', exe)
MESON
cat > "$tmp/src/meson_options.txt" <<'MESON'
option('fixed', type : 'boolean', value : false)
MESON
cat > "$tmp/src/leaky.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Returns a copy the caller must free; without FIXED, the caller drops it.
__attribute__((noinline)) static char *make_greeting(const char *name) {
    char *s = malloc(64);
    if (s)
        snprintf(s, 64, "hello, %s", name);
    return s;
}

__attribute__((noinline)) static int greet(void) {
    char *g = make_greeting("world");
    int ok = g && strlen(g) == 12;
#ifdef FIXED
    free(g);
#endif
    g = NULL;
    return ok ? 0 : 1;
}

int main(void) {
    return greet();
}
C

PATH=$(dirname "$tpprof"):$PATH
export PATH
# The outer test runner's variables must not steer the inner one.
unset MESON_TESTTHREADS MALLOC_PERTURB_ LD_PRELOAD

cd "$tmp" || exit 1
meson setup build src > setup.log 2>&1 || { cat setup.log; fail "meson setup"; }
grep -q "Program tpprof found: YES" setup.log || { cat setup.log; fail "the project did not find tpprof on PATH"; }

meson test -C build --setup tpprof --print-errorlogs > leaky.log 2>&1
status=$?
[ "$status" -ne 0 ] || { cat leaky.log; fail "the leaking test passed under --setup tpprof"; }
grep -q "FAIL lost bytes 64 > 0: 64 B in make_greeting (leaky.c:" build/meson-logs/testlog-tpprof.txt ||
    { cat leaky.log; fail "the failing gate is not named"; }
grep -q "exit status 99" build/meson-logs/testlog-tpprof.txt ||
    { cat build/meson-logs/testlog-tpprof.txt; fail "tpprof's --error-exitcode 99 not seen"; }
echo "under the setup the leak fails the test (exit 99)"

meson test -C build > plain.log 2>&1 || { cat plain.log; fail "without the setup the test must pass"; }
echo "without the setup it passes"

meson configure build -Dfixed=true > /dev/null 2>&1 || fail "meson configure -Dfixed=true"
meson test -C build --setup tpprof > fixed.log 2>&1 ||
    { cat fixed.log build/meson-logs/testlog-tpprof.txt; fail "the fixed test fails under --setup tpprof"; }
grep -q "tpprof: PASS 1 gate" build/meson-logs/testlog-tpprof.txt ||
    { cat build/meson-logs/testlog-tpprof.txt; fail "the gate's PASS line is missing"; }
echo "fixed, it passes under the setup"
