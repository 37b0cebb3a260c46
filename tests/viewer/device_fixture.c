// device_fixture.c: writes the device tables of device_fixture.h into the
// "app" recording, following docs/schema.md ("Device memory").
#include "device_fixture.h"

#include "fixture.h"

#include <stdio.h>

#define MS "000000"

static const char device_sql[] =
    "CREATE TABLE device_events(seq INTEGER PRIMARY KEY, time_ns INTEGER NOT NULL, tid INTEGER NOT NULL, "
    "  op INTEGER NOT NULL, api TEXT NOT NULL, kind INTEGER NOT NULL, device INTEGER NOT NULL, "
    "  stream INTEGER, pool INTEGER, address INTEGER, size INTEGER, stack_id INTEGER NOT NULL, "
    "  result INTEGER NOT NULL, flag INTEGER NOT NULL DEFAULT 0);"
    "CREATE TABLE device_blocks(address INTEGER NOT NULL, device INTEGER NOT NULL, kind INTEGER NOT NULL, "
    "  size INTEGER NOT NULL, api TEXT NOT NULL, stream INTEGER, stack_id INTEGER NOT NULL, tid INTEGER, "
    "  alloc_ns INTEGER NOT NULL, free_ns INTEGER, free_stack_id INTEGER, free_api TEXT, ended_by TEXT);"
    "CREATE TABLE device_timeline(time_ns INTEGER NOT NULL, device INTEGER NOT NULL, "
    "  allocated_bytes INTEGER NOT NULL, reserved_bytes INTEGER, PRIMARY KEY (time_ns, device));"
    "INSERT INTO kinds VALUES (20,'cuda_device'),(21,'cuda_async'),(22,'cuda_managed'),(23,'cuda_pitch'),"
    "  (24,'cuda_pinned_host'),(25,'cuda_vmm_reserve'),(26,'cuda_vmm_physical'),(27,'cuda_vmm_mapping');"
    // Stacks under main (node 1), one frame each.
    "INSERT INTO stack_nodes VALUES (20,1,4202512),(21,1,4202768),(22,1,4203024),(23,1,4203280),"
    "  (24,1,4203536),(25,1,4203792),(26,1,4204048);"
    "INSERT INTO symbols VALUES "
    "  (4202512,0,'leak_dev','/src/app/dev.cu',10,'/opt/fake/app'),"
    "  (4202768,0,'train_step','/src/app/train.cu',20,'/opt/fake/app'),"
    "  (4203024,0,'reset_all','/src/app/reset.cu',30,'/opt/fake/app'),"
    "  (4203280,0,'vmm_grow','/src/app/vmm.cu',40,'/opt/fake/app'),"
    "  (4203536,0,'bad_free','/src/app/bad.cu',50,'/opt/fake/app'),"
    "  (4203792,0,'pin_buffers','/src/app/pin.cu',60,'/opt/fake/app'),"
    "  (4204048,0,'dev1_work','/src/app/multi.cu',70,'/opt/fake/app');"
    // device_blocks(address, device, kind, size, api, stream, stack_id, tid, alloc_ns, free_ns,
    //   free_stack_id, free_api, ended_by)
    "INSERT INTO device_blocks VALUES "
    "  (0x7f0000000000, 0, 20, 1048576, 'cudaMalloc', NULL, 20, 100, 1" MS ", NULL, NULL, NULL, NULL),"
    "  (0x7f0000200000, 0, 21, 4194304, 'cudaMallocAsync', 7, 21, 100, 2" MS ", 5" MS ", 21, 'cudaFreeAsync', NULL),"
    "  (0x7f0000600000, 0, 21, 4194304, 'cudaMallocAsync', 7, 21, 100, 3" MS ", 6" MS ", 21, 'cudaFreeAsync', NULL),"
    "  (0x7f0000a00000, 0, 20, 2097152, 'cudaMalloc', NULL, 22, 100, 4" MS ", 8" MS ", 22, 'cudaDeviceReset', "
    "   'device_reset'),"
    "  (0x7f1000000000, 0, 25, 67108864, 'cuMemAddressReserve', NULL, 23, 100, 1" MS ", NULL, NULL, NULL, NULL),"
    "  (4096, 0, 26, 2097152, 'cuMemCreate', NULL, 23, 100, 1" MS ", 9" MS ", 23, 'cuMemRelease', NULL),"
    "  (0x7f1000000000, 0, 27, 2097152, 'cuMemMap', NULL, 23, 100, 1" MS ", 9" MS ", 23, 'cuMemUnmap', NULL),"
    "  (0x7f2000000000, 1, 20, 8388608, 'cuMemAlloc_v2', NULL, 26, 101, 2" MS ", 7" MS ", 26, 'cuMemFree_v2', NULL),"
    "  (0x7f2000800000, 1, 22, 16777216, 'cudaMallocManaged', NULL, 26, 101, 10" MS ", NULL, NULL, NULL, NULL),"
    "  (0x7e0000000000, -1, 24, 65536, 'cudaMallocHost', NULL, 25, 100, 1" MS ", 2" MS ", 25, 'cudaFreeHost', NULL),"
    "  (0x7e0000010000, -1, 24, 32768, 'cudaHostAlloc', NULL, 25, 100, 3" MS ", NULL, NULL, NULL, NULL);"
    // device_events(seq, time_ns, tid, op, api, kind, device, stream, pool, address, size, stack_id,
    //   result, flag): the successful calls (as the recorder writes them), then the failures.
    "INSERT INTO device_events VALUES "
    "  (1, 1" MS ", 100, 1, 'cudaMalloc', 20, 0, NULL, NULL, 0x7f0000000000, 1048576, 20, 0, 0),"
    "  (2, 2" MS ", 100, 1, 'cudaMallocAsync', 21, 0, 7, NULL, 0x7f0000200000, 4194304, 21, 0, 0),"
    "  (3, 5" MS ", 100, 2, 'cudaFreeAsync', 21, 0, 7, NULL, 0x7f0000200000, 4194304, 21, 0, 0),"
    "  (4, 11" MS ", 100, 1, 'cudaMalloc', 20, 0, NULL, NULL, NULL, 85899345920, 21, 2, 4),"
    "  (5, 12" MS ", 100, 2, 'cudaFree', 20, 0, NULL, NULL, 0x7f0000200000, NULL, 24, 1, 1),"
    "  (6, 13" MS ", 100, 2, 'cudaFree', 20, 0, NULL, NULL, 0x1234, NULL, 24, 1, 2),"
    "  (7, 14" MS ", 100, 2, 'cudaFree', 20, 0, NULL, NULL, 0x5555aaaa0000, NULL, 24, 1, 3),"
    "  (8, 15" MS ", 101, 1, 'cudaMalloc', 20, 1, NULL, NULL, NULL, 1024, 26, 35, 0);"
    "INSERT INTO device_timeline VALUES (1" MS ", 0, 3145728, 8388608), (4" MS ", 0, 13631488, 16777216),"
    "  (9" MS ", 0, 1048576, 4194304), (2" MS ", 1, 8388608, NULL), (10" MS ", 1, 16777216, NULL);"
    "INSERT INTO meta VALUES ('device_capture','interpose'), ('device_calls_failed','5'), "
    "  ('device_bad_frees','3');";

int device_fixture_write(const char *path) {
    fixture_options o = {0};
    return fixture_write_edited(path, &o, device_sql);
}
