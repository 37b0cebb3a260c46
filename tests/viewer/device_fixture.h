// device_fixture.h: the device (CUDA) memory tables of docs/schema.md added
// to fixture.h's "app" recording, hand-written as the recorder's contract
// says, so the viewer's device tests do not need the capture half.
//
// Kinds 20..27: cuda_device, cuda_async, cuda_managed, cuda_pitch,
// cuda_pinned_host, cuda_vmm_reserve, cuda_vmm_physical, cuda_vmm_mapping.
// MiB = 1048576; times in ms; every stack's outermost frame is main.
//
//   #  device  stack (function)   api                   kind           size    alloc  end
//   1  0       leak_dev           cudaMalloc            cuda_device    1 MiB   1      never       -> leak
//   2  0       train_step         cudaMallocAsync       cuda_async     4 MiB   2      5
//   3  0       train_step         cudaMallocAsync       cuda_async     4 MiB   3      6
//   4  0       reset_all          cudaMalloc            cuda_device    2 MiB   4      8 device_reset -> leak
//   5  0       vmm_grow           cuMemAddressReserve   cuda_vmm_reserve 64 MiB 1     never (address space)
//   6  0       vmm_grow           cuMemCreate           cuda_vmm_physical 2 MiB 1     9
//   7  0       vmm_grow           cuMemMap              cuda_vmm_mapping 2 MiB  1     9 (address space)
//   8  1       dev1_work          cuMemAlloc_v2         cuda_device    8 MiB   2      7
//   9  1       dev1_work          cudaMallocManaged     cuda_managed   16 MiB  10     never       -> leak
//  10  -1      pin_buffers        cudaMallocHost        cuda_pinned_host 64 KiB 1     2
//  11  -1      pin_buffers        cudaHostAlloc         cuda_pinned_host 32 KiB 3     never       -> pinned leak
//
// device_events with a failure or a flag: device 0: an out-of-memory
// cudaMalloc (train_step), a double free, a free of an unknown pointer and
// a free of a host pointer (cudaFree in bad_free, each returning 1); device
// 1: a cudaMalloc that failed with 35 (no driver). meta: device_capture
// interpose, device_calls_failed 5, device_bad_frees 3. device_timeline:
// device 0 pools reserve up to 16 MiB; device 1 reserved unknown.
#ifndef TPPROF_TEST_DEVICE_FIXTURE_H
#define TPPROF_TEST_DEVICE_FIXTURE_H

#define DEV_MIB 1048576ull
#define DEV0_ALLOCATIONS 5u
#define DEV0_ALLOCATED (13 * DEV_MIB)
#define DEV0_PEAK (13 * DEV_MIB)     // at 4 ms
#define DEV0_LEAKED (3 * DEV_MIB)    // 1 MiB alive + 2 MiB ended by the reset
#define DEV1_PEAK (16 * DEV_MIB)     // at 10 ms
#define DEV1_LEAKED (16 * DEV_MIB)
#define DEV_TOTAL_PEAK (21 * DEV_MIB) // at 4 ms: 13 on device 0 + 8 on device 1
#define DEV_TOTAL_LEAKED (19 * DEV_MIB)
#define DEV_PINNED_PEAK 65536u
#define DEV_PINNED_LEAKED 32768u

// fixture_write's "app" recording (default options) plus the tables above.
// Returns 0 or -1 (message on stderr).
int device_fixture_write(const char *path);

#endif
