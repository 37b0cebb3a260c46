#!/bin/bash
# Python frames in the stacks: runs check_pyframes.py MODE with the python3
# that the recorder is tested against (Debian's first), or skips (77) when
# there is none.
# usage: pyframes.sh MODE LIBTPPROF TPPROF
set -u
py=""
for p in /usr/bin/python3 "$(command -v python3 2>/dev/null)"; do
    if [ -n "$p" ] && [ -x "$p" ]; then py=$p; break; fi
done
[ -n "$py" ] || { echo "skip: no python3"; exit 77; }
exec "$py" "$(dirname "$0")/check_pyframes.py" "$1" "$(realpath "$2")" "$(realpath "$3")" "$py"
