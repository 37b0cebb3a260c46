# Allocations from a C recursion built with frame pointers (fpdeep.c): first
# on a thread that runs no Python (the native stack alone, recorded as it
# is; the writer then makes its trie leaf and lets the depot's copy of its
# frames go), then 3,000 times from Python, the same native stack. Each of
# those must keep its native frames with its Python ones: the recorder
# merged the Python frames into the depot's copy, gone by then, and
# recorded the Python frames alone.
import ctypes
import sys
import time

lib = ctypes.CDLL(sys.argv[1])
lib.fp_deep.restype = ctypes.c_void_p
lib.fp_deep.argtypes = [ctypes.c_int, ctypes.c_size_t]
lib.fp_free.argtypes = [ctypes.c_void_p]
lib.fp_deep_on_a_thread.argtypes = [ctypes.c_size_t]


def deep_calls():
    for i in range(3000):
        p = lib.fp_deep(40, 77_777)  # DEEP
        lib.fp_free(p)


for _ in range(10):
    assert lib.fp_deep_on_a_thread(77_777) == 0
time.sleep(0.3)
deep_calls()
