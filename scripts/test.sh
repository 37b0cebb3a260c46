#!/usr/bin/env bash
# README command (2): install what is missing, build, and run the whole test
# suite twice: plainly (build/) and under ASan+UBSan (build-asan/, meson test
# setup 'asan', which leaves out the LD_PRELOAD suite: an instrumented shim
# cannot be preloaded into uninstrumented programs).  Ends with the line
# "N passed, N failed" counted from meson's test logs; exits non-zero if any
# test failed or anything did not build.
set -uo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh || { echo "0 passed, 1 failed"; exit 1; }

status=0
[ -f build/build.ninja ] || meson setup build -Dwerror=true || status=1
[ -f build-asan/build.ninja ] || meson setup build-asan -Dwerror=true \
    -Db_sanitize=address,undefined -Db_lundef=false || status=1

rm -f build/meson-logs/testlog.json build-asan/meson-logs/testlog-asan.json
if [ $status -eq 0 ]; then
    ninja -C build || status=1
    meson test -C build --print-errorlogs --num-processes 2 || status=1
    ninja -C build-asan || status=1
    meson test -C build-asan --setup=asan --print-errorlogs --num-processes 2 || status=1
fi

python3 - "$status" build/meson-logs/testlog.json build-asan/meson-logs/testlog-asan.json <<'PY'
import json, sys
build_failed = sys.argv[1] != "0"
passed = failed = skipped = 0
for path in sys.argv[2:]:
    try:
        lines = open(path).read().splitlines()
    except OSError:
        continue
    for line in lines:
        if not line.strip():
            continue
        r = json.loads(line).get("result", "")
        if r in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif r == "SKIP":
            skipped += 1
        else:
            failed += 1
if build_failed and failed == 0:
    failed = 1  # a build or setup failure is a failure even if no test ran
print(f"{passed} passed, {failed} failed, {skipped} skipped")
PY
exit $status
