#!/bin/sh
# tests/gpu/run.sh - everything CUDA on a machine with an NVIDIA GPU, in
# well under 5 minutes: builds with -Dcuda=enabled (build-gpu/), runs every
# CUDA test (the runtime-double ones too), the device op-by-op comparison,
# the CUDA samples (both allocator backends), the speed targets and tpprof's
# device memory capture (tests/gpu/device_capture.sh), and
# prints one PASS/FAIL line per check with its figures, then a summary.
#
# usage: tests/gpu/run.sh [build-dir]     (run from anywhere in the repo)
# exit status: 0 all passed, 1 something failed, 77 no GPU here.
set -u
PATH=$PATH:/usr/local/cuda/bin # where the toolkit installs nvcc
cd "$(dirname "$0")/../.."
B=${1:-build-gpu}
pass=0 fail=0 skipped=0
say() { echo "$@"; }
check() { # check NAME CMD... : PASS when CMD exits 0, SKIP on 77, else FAIL
  name=$1; shift
  out=$("$@" 2>&1); rc=$?
  if [ $rc -eq 0 ]; then pass=$((pass+1)); say "PASS $name"
  elif [ $rc -eq 77 ]; then skipped=$((skipped+1)); say "SKIP $name: $(echo "$out" | grep -m1 SKIP)"
  else fail=$((fail+1)); say "FAIL $name (exit $rc)"; echo "$out" | tail -20 | sed 's/^/    /'; fi
  echo "$out" | grep -E '^(PASS|FAIL) ' | sed 's/^/    /' | grep -v '^    PASS' | head -40
  echo "$out" | grep -E 'loss|allocator|MiB|block|GB/s|TFLOP|ns \(' | grep -v '^PASS\|^FAIL' | sed 's/^/    | /' | head -12
}

command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed 's/^/GPU: /'
start=$(date +%s)
for tool in meson ninja nvcc; do
  command -v $tool >/dev/null 2>&1 || { echo "FAIL $tool is not installed (scripts/deps.sh; nvcc: the CUDA toolkit)"; exit 1; }
done
if [ ! -f "$B/build.ninja" ]; then
  meson setup "$B" -Dcuda=enabled -Dbuildtype=release >/dev/null || { echo "FAIL meson setup"; exit 1; }
fi
ninja -C "$B" >/dev/null || { echo "FAIL build"; ninja -C "$B" 2>&1 | tail -20; exit 1; }
say "built in $(( $(date +%s) - start )) s"

check "cuda tests (runtime double and no-device)" meson test -C "$B" --suite cuda --no-rebuild --print-errorlogs
check "op-by-op comparison with the CPU" "$B/tests/cuda/test_cuda_ops"
"$B/tests/cuda/test_cuda_ops" 2>/dev/null | grep -c '^PASS' | sed 's/^/    device checks passed: /'
check "sample mlp_gpu (caching allocator)" "$B/samples/cuda/mlp_gpu" 60
check "sample mlp_gpu (TP_ALLOC_CONF=backend:cudaMallocAsync)" env TP_ALLOC_CONF=backend:cudaMallocAsync "$B/samples/cuda/mlp_gpu" 60
check "sample stream_reuse (record_stream keeps the block)" "$B/samples/cuda/stream_reuse"
check "sample fragmentation (caching vs cudaMallocAsync)" "$B/samples/cuda/fragmentation" cuda:0 24
check "speed targets (bench/cuda_bench)" "$B/bench/cuda_bench"
# tpprof's device memory capture on the real driver (docs/device.md).
check "tpprof device tests on the doubles" meson test -C "$B" --suite device --no-rebuild --print-errorlogs
for what in static shared ptds cublas runtime_sample cupti; do
  check "tpprof device capture: $what" sh tests/gpu/device_capture.sh "$B" $what
  sh tests/gpu/device_capture.sh "$B" $what 2>&1 | grep -E '^(PASS|    \|)' | sed 's/^/    /' | head -16
done
"$B/bench/cuda_bench" 2>&1 | sed 's/^/    /'

say "$pass passed, $fail failed, $skipped skipped in $(( $(date +%s) - start )) s"
[ $fail -eq 0 ] || exit 1
[ $skipped -eq 0 ] || exit 77
