#!/bin/sh
# thread_count.sh PRELOAD THREADCOUNT: a program reading its own thread count
# (/proc/self/stat and /proc/self/status through fopen) reads what it reads
# natively under the preload, with and without threads of its own: tpprof's
# writer is not the program's. Then CPython 3.12 and 3.13, where installed
# (pyenv), fork under `-W error` as natively: they read that count in
# os.fork() and warn of a multi-threaded fork (an error here) when it is
# above 1.
set -eu
lib=$1 prog=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for n in 0 2; do
  "$prog" $n > "$tmp/native"
  LD_PRELOAD=$lib TPPROF_OUTPUT=$tmp/t$n.db "$prog" $n > "$tmp/preload"
  if ! cmp -s "$tmp/native" "$tmp/preload"; then
    echo "with $n threads of its own, natively:"; cat "$tmp/native"
    echo "under the preload:"; cat "$tmp/preload"; exit 1
  fi
  [ -s "$tmp/t$n.db" ] || { echo "no recording"; exit 1; }
done
cat > "$tmp/fork.py" <<'PY'
import os
pid = os.fork()
if pid == 0:
    os._exit(7)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
PY
for py in "$HOME"/.pyenv/versions/3.12*/bin/python3 "$HOME"/.pyenv/versions/3.13*/bin/python3; do
  [ -x "$py" ] || continue
  "$py" -W error "$tmp/fork.py" > "$tmp/native" 2>&1 || { echo "$py fails natively"; cat "$tmp/native"; exit 1; }
  if ! LD_PRELOAD=$lib TPPROF_OUTPUT=$tmp/py.db "$py" -W error "$tmp/fork.py" > "$tmp/preload" 2>&1 ||
     ! cmp -s "$tmp/native" "$tmp/preload"; then
    echo "$py -W error forking, natively:"; cat "$tmp/native"
    echo "under the preload:"; cat "$tmp/preload"; exit 1
  fi
  echo "$py: forks as natively"
done
echo ok
