#!/bin/sh
# tests/gpu/device_capture.sh BUILD CHECK: one check of tpprof's device
# memory capture on a real GPU (tests/gpu/run.sh calls each; docs/device.md).
# Prints PASS/FAIL lines with figures; exit 0 pass, 1 fail, 77 skip.
#   static | shared | ptds   rt_app built three ways (tests/tpprof/cuda):
#                            each allocation once, the leak alive in
#                            leak_buffer, the reset ending device 1's block
#   cublas                   real cuBLAS SGEMM loop: workspace allocations
#                            seen; time within 2% of native (medians of 5
#                            interleaved runs)
#   runtime_sample           libtensorplay's mlp_gpu (libcudart dlopen'ed):
#                            its device memory seen, none left at exit
#   cupti                    rt_app (static runtime) with the CUPTI backend
#                            (CUDA_INJECTION64_PATH=libtpprof.so, as `tpprof
#                            run --cupti`): captured by CUPTI, each
#                            allocation once, the leak with leak_buffer on
#                            its stack. On the doubles: rt_app shared and
#                            the fake libcupti of the tests
# TPPROF_GPU_DOUBLES=DIR runs static/shared/ptds on the CUDA doubles in DIR
# instead (checks this script on a machine without a GPU; static skips).
set -u
B=${1:?usage: device_capture.sh BUILD CHECK}
WHAT=${2:?usage: device_capture.sh BUILD CHECK}
LIB=$(cd "$B/src/tpprof" && pwd)/libtpprof.so
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0
ok() { echo "PASS $*"; }
bad() { echo "FAIL $*"; fails=$((fails+1)); }
q() { sqlite3 "$DB" "$1"; }
expect() { # expect WHAT SQL VALUE
  v=$(q "$2"); if [ "$v" = "$3" ]; then ok "$1 ($v)"; else bad "$1: got '$v', want '$3'"; fi
}
expect_ge() {
  v=$(q "$2"); if [ "${v:-0}" -ge "$3" ] 2>/dev/null; then ok "$1 ($v)"; else bad "$1: got '$v', want >= $3"; fi
}
# The function of the innermost frame of stack_nodes id $1 (addr2line on
# the module that holds it).
frame0_fn() {
  ip=$(q "SELECT ip FROM stack_nodes WHERE id = $1")
  [ -n "$ip" ] || return 0
  ip_fn "$ip"
}
ip_fn() { # the function of return address $1
  ip=$1
  row=$(q "SELECT path || '|' || base FROM modules WHERE lo <= $ip AND $ip < hi ORDER BY id DESC LIMIT 1")
  path=${row%|*}; base=${row#*|}
  addr2line -f -C -e "$path" "$(printf '0x%x' $((ip - 1 - base)))" | head -1
}
record() { # record NAME CMD...: runs natively and under tpprof, outputs compared
  name=$1; shift
  "$@" > "$TMP/$name.native" 2>&1; nrc=$?
  DB=$TMP/$name.db
  LD_PRELOAD=$LIB TPPROF_OUTPUT=$DB "$@" > "$TMP/$name.out" 2>&1; rc=$?
  if [ $rc -eq $nrc ] && cmp -s "$TMP/$name.native" "$TMP/$name.out"; then ok "$name: exit $rc and output as native"
  else bad "$name: exit $rc vs $nrc native, or output differs"; diff "$TMP/$name.native" "$TMP/$name.out" | head -8; fi
}

case $WHAT in
static|shared|ptds)
  APP=$B/tests/tpprof/cuda/tpprof_cuda_rt_app_$WHAT
  [ -x "$APP" ] || { echo "SKIP no $APP (built with -Dcuda=enabled)"; exit 77; }
  if [ -n "${TPPROF_GPU_DOUBLES:-}" ]; then
    [ "$WHAT" = static ] && { echo "SKIP the static runtime needs a real driver"; exit 77; }
    export LD_LIBRARY_PATH=$TPPROF_GPU_DOUBLES
  fi
  record "rt_app_$WHAT" "$APP"
  ndev=$(sed -n 's/^devices: //p' "$TMP/rt_app_$WHAT.out")
  want=13; [ "${ndev:-0}" -ge 2 ] || want=12 # the reset step (one more cudaMalloc) needs two devices
  expect "$WHAT: device_capture" "SELECT value FROM meta WHERE key = 'device_capture'" interpose
  if [ "$WHAT" = static ]; then
    # The static runtime reaches the driver through its wrapped table: one
    # driver-level event per runtime allocation (13 calls; cudaMalloc3D and
    # pitch as the runtime implements them), none under runtime names.
    expect_ge "static: allocations seen through the wrapped driver table" \
      "SELECT count(*) FROM device_events WHERE op = 1 AND api LIKE 'cuMem%'" $((want - 2))
    expect "static: no runtime-level names" "SELECT count(*) FROM device_events WHERE api LIKE 'cuda%'" 0
    q "SELECT api, count(*) FROM device_events GROUP BY api" | sed 's/^/    | /'
  else
    expect "$WHAT: $want runtime allocations, each once" "SELECT count(*) FROM device_events WHERE op = 1" $want
    expect "$WHAT: nested driver calls not recorded again" \
      "SELECT count(*) FROM device_events WHERE api LIKE 'cu%' AND api NOT LIKE 'cuda%' AND op NOT BETWEEN 7 AND 12" 0
    async=cudaMallocAsync; [ "$WHAT" = ptds ] && async=cudaMallocAsync_ptsz
    expect "$WHAT: $async on two streams" "SELECT count(DISTINCT stream) FROM device_events WHERE api = '$async'" 2
  fi
  leak=$(q "SELECT stack_id FROM device_blocks WHERE free_ns IS NULL AND ended_by IS NULL AND size = 3145728 LIMIT 1")
  fn=$(frame0_fn "${leak:-0}")
  case $fn in *leak_buffer*) ok "$WHAT: the 3 MiB leak alive, in $fn";; *) bad "$WHAT: leak's frame: '$fn'";; esac
  if [ "${ndev:-0}" -ge 2 ]; then
    expect "$WHAT: the reset ended device 1's block" \
      "SELECT count(*) FROM device_blocks WHERE ended_by = 'device_reset' AND size = 2097152" 1
  else
    echo "    | one device: the reset step is not run"
  fi
  expect "$WHAT: VMM calls from cudaGetDriverEntryPointByVersion (reserve, create, map, unmap, release, free)" \
    "SELECT count(DISTINCT op) FROM device_events WHERE op BETWEEN 7 AND 12 AND result = 0" 6
  expect "$WHAT: double free and unknown pointer flagged" \
    "SELECT count(*) FROM device_events WHERE flag IN (1, 2)" 2
  q "SELECT device, max(allocated_bytes), max(reserved_bytes) FROM device_timeline GROUP BY device" | sed 's/^/    | device, peak, reserved: /'
  ;;
cublas)
  command -v nvcc >/dev/null 2>&1 || { echo "SKIP no nvcc"; exit 77; }
  APP=$TMP/sgemm_loop
  lib64=$(dirname "$(command -v nvcc)")/../lib64
  nvcc -O2 -o "$APP" tests/gpu/sgemm_loop.cu -lcublas -Xlinker -rpath -Xlinker "$lib64" || { echo "FAIL building sgemm_loop"; exit 1; }
  : > "$TMP/times"
  for r in 1 2 3 4 5; do
    n=$("$APP" 2048 300 | sed -n 's/.*: \([0-9.]*\) ms/\1/p')
    DB=$TMP/cublas$r.db
    t=$(LD_PRELOAD=$LIB TPPROF_OUTPUT=$DB "$APP" 2048 300 | sed -n 's/.*: \([0-9.]*\) ms/\1/p')
    echo "$n $t" >> "$TMP/times"
    echo "    | round $r: native $n ms, tpprof $t ms"
  done
  ratio=$(awk '{print $2 / $1}' "$TMP/times" | sort -n | sed -n 3p)
  if awk -v r="$ratio" 'BEGIN {exit !(r <= 1.02)}'; then ok "cublas SGEMM loop: tpprof/native median $ratio (<= 1.02)"
  else bad "cublas SGEMM loop: tpprof/native median $ratio (> 1.02)"; fi
  expect_ge "cublas: the loop's 300 cudaMallocAsync seen" \
    "SELECT count(*) FROM device_events WHERE op = 1 AND api LIKE '%MallocAsync%'" 300
  expect_ge "cublas: allocations made inside libcublas (its workspace) seen" \
    "SELECT count(*) FROM device_events e JOIN stack_nodes s ON s.id = e.stack_id JOIN modules m ON m.lo <= s.ip AND s.ip < m.hi WHERE e.op = 1 AND m.path LIKE '%cublas%'" 1
  ;;
runtime_sample)
  APP=$B/samples/cuda/mlp_gpu
  [ -x "$APP" ] || { echo "SKIP no $APP"; exit 77; }
  DB=$TMP/mlp.db
  LD_PRELOAD=$LIB TPPROF_OUTPUT=$DB "$APP" 20 > "$TMP/mlp.out" 2>&1 || bad "mlp_gpu under tpprof failed"
  expect_ge "mlp_gpu: device allocations seen (libcudart dlopen'ed by libtensorplay)" \
    "SELECT count(*) FROM device_events WHERE op = 1 AND result = 0" 1
  q "SELECT api, count(*), sum(size) FROM device_events WHERE op = 1 GROUP BY api" | sed 's/^/    | /'
  ;;
cupti)
  APP=$B/tests/tpprof/cuda/tpprof_cuda_rt_app_static
  if [ -n "${TPPROF_GPU_DOUBLES:-}" ]; then
    APP=$B/tests/tpprof/cuda/tpprof_cuda_rt_app_shared
    export LD_LIBRARY_PATH=$TPPROF_GPU_DOUBLES TPPROF_CUPTI_LIB=$B/tests/tpprof/libfakecupti.so
  fi
  [ -x "$APP" ] || { echo "SKIP no $APP (built with -Dcuda=enabled)"; exit 77; }
  "$APP" > "$TMP/cupti.native" 2>&1; nrc=$?
  DB=$TMP/cupti.db
  LD_PRELOAD=$LIB CUDA_INJECTION64_PATH=$LIB TPPROF_CUPTI=1 TPPROF_OUTPUT=$DB "$APP" > "$TMP/cupti.out" 2> "$TMP/cupti.err"; rc=$?
  if [ $rc -eq $nrc ] && cmp -s "$TMP/cupti.native" "$TMP/cupti.out"; then ok "cupti: exit $rc and output as native"
  else bad "cupti: exit $rc vs $nrc native, or output differs"; diff "$TMP/cupti.native" "$TMP/cupti.out" | head -8; fi
  grep 'tpprof: --cupti' "$TMP/cupti.err" | sed 's/^/    | /'
  expect "cupti: device_capture" "SELECT value FROM meta WHERE key = 'device_capture'" cupti
  expect "cupti: the 1 MiB weights allocated once" "SELECT count(*) FROM device_events WHERE op = 1 AND size = 1048576" 1
  expect "cupti: the 3 MiB leak allocated once, alive at exit" \
    "SELECT count(*) FROM device_blocks WHERE free_ns IS NULL AND ended_by IS NULL AND size = 3145728" 1
  # The leak's stack (its innermost frames are CUPTI's and the driver's).
  leak=$(q "SELECT stack_id FROM device_blocks WHERE free_ns IS NULL AND ended_by IS NULL AND size = 3145728 LIMIT 1")
  found=; n=0; id=${leak:-0}
  while [ "${id:-0}" -gt 0 ] && [ $n -lt 40 ] && [ -z "$found" ]; do
    case $(ip_fn "$(q "SELECT ip FROM stack_nodes WHERE id = $id")") in *leak_buffer*) found=1;; esac
    id=$(q "SELECT parent FROM stack_nodes WHERE id = $id"); n=$((n+1))
  done
  if [ -n "$found" ]; then ok "cupti: leak_buffer on the leak's stack"; else bad "cupti: leak_buffer not on the leak's stack"; fi
  q "SELECT api, device, count(*) FROM device_events WHERE op = 1 GROUP BY api, device" | sed 's/^/    | /'
  ;;
*) echo "unknown check $WHAT"; exit 2 ;;
esac
[ $fails -eq 0 ]
