#!/bin/sh
# bench/train_step.sh - one MLP training step, libtensorplay against
# PyTorch (Debian's python3-torch), both with the same thread count for
# kernels and BLAS, run alternately ROUNDS times so that both see the same
# machine load.  Usage: bench/train_step.sh [build dir] [threads] [rounds] [steps]
set -eu
build=${1:-build}
threads=${2:-1}
rounds=${3:-3}
steps=${4:-30}
here=$(dirname "$0")
py=/usr/bin/python3
export OPENBLAS_NUM_THREADS="$threads" OMP_NUM_THREADS="$threads"
if ! "$py" -c 'import torch' 2>/dev/null; then
    echo "train_step.sh: PyTorch is not importable by $py (apt-get install python3-torch)" >&2
    exit 1
fi
i=1
while [ "$i" -le "$rounds" ]; do
    echo "--- round $i"
    "$build/bench/train_step" "$steps" "$threads"
    "$py" "$here/train_step_torch.py" "$steps" "$threads"
    i=$((i + 1))
done
