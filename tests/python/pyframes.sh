#!/bin/bash
# Python frames in the stacks: runs check_pyframes.py MODE with the python3
# that the recorder is tested against (Debian's first), or with CPython
# VERSION (3.12, 3.13: pyenv's, or the system's) when given; skips (77) when
# there is none.
# usage: pyframes.sh MODE LIBTPPROF TPPROF [VERSION]
set -u
py=""
if [ $# -ge 4 ]; then
    v=$4
    cands=()
    for d in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$v".*/bin; do cands+=("$d/python$v"); done
    cands+=(/usr/bin/python"$v" /usr/local/bin/python"$v" "$(command -v python"$v" 2>/dev/null)")
    for p in "${cands[@]}"; do
        # (A pyenv shim for a version not selected is on PATH and fails.)
        if [ -n "$p" ] && [ -x "$p" ] && "$p" -c pass >/dev/null 2>&1; then py=$p; break; fi
    done
    [ -n "$py" ] || { echo "skip: no python$v"; exit 77; }
else
    for p in /usr/bin/python3 "$(command -v python3 2>/dev/null)"; do
        if [ -n "$p" ] && [ -x "$p" ]; then py=$p; break; fi
    done
    [ -n "$py" ] || { echo "skip: no python3"; exit 77; }
fi
exec "$py" "$(dirname "$0")/check_pyframes.py" "$1" "$(realpath "$2")" "$(realpath "$3")" "$py"
