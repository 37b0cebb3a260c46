"""tests/interop/test_dlpack_numpy.py - DLPack exchange with NumPy, through
ctypes (libtensorplay's C API, PyCapsules from Python's C API).

NumPy 1.24 (Debian 12) speaks the unversioned "dltensor" capsule, so this
exercises tp_to_dlpack_unversioned / tp_from_dlpack_unversioned; the
versioned struct is tested in C (test_dlpack.c).  Exits 77 (meson's skip)
when NumPy or np.from_dlpack is missing.

Usage: test_dlpack_numpy.py PATH/TO/libtensorplay.so
"""
import ctypes
import sys

try:
    import numpy as np
except ImportError:
    print("numpy is not installed: skipped")
    sys.exit(77)
if not hasattr(np, "from_dlpack"):
    print("numpy has no from_dlpack: skipped")
    sys.exit(77)

lib = ctypes.CDLL(sys.argv[1])
P = ctypes.c_void_p
lib.tp_arange.restype = P
lib.tp_arange.argtypes = [ctypes.c_double, ctypes.c_double, ctypes.c_double, ctypes.c_int]
lib.tp_tensor_view.restype = P
lib.tp_tensor_view.argtypes = [P, ctypes.c_int, ctypes.POINTER(ctypes.c_int64)]
lib.tp_tensor_transpose.restype = P
lib.tp_tensor_transpose.argtypes = [P, ctypes.c_int, ctypes.c_int]
lib.tp_tensor_release.argtypes = [P]
lib.tp_tensor_use_count.restype = ctypes.c_uint32
lib.tp_tensor_use_count.argtypes = [P]
lib.tp_tensor_data.restype = P
lib.tp_tensor_data.argtypes = [P]
lib.tp_tensor_get.argtypes = [P, ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_double)]
lib.tp_to_dlpack_unversioned.restype = P
lib.tp_to_dlpack_unversioned.argtypes = [P]
lib.tp_from_dlpack_unversioned.restype = P
lib.tp_from_dlpack_unversioned.argtypes = [ctypes.POINTER(P)]
lib.tp_last_error.restype = ctypes.c_char_p

api = ctypes.pythonapi
api.PyCapsule_New.restype = ctypes.py_object
api.PyCapsule_New.argtypes = [P, ctypes.c_char_p, P]
api.PyCapsule_GetPointer.restype = P
api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]

failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)


FLOAT32 = 0


def get(t, i, j):
    v = ctypes.c_double()
    lib.tp_tensor_get(t, (ctypes.c_int64 * 2)(i, j), ctypes.byref(v))
    return v.value


class Exported:
    """What np.from_dlpack wants: __dlpack__ and __dlpack_device__."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, stream=None):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU


# --- libtensorplay -> NumPy: zero-copy, strides kept, the deleter run when NumPy lets go
a = lib.tp_arange(0, 12, 1, FLOAT32)
m = lib.tp_tensor_view(a, 2, (ctypes.c_int64 * 2)(3, 4))
t = lib.tp_tensor_transpose(m, 0, 1)  # (4, 3), strides (1, 4)
before = lib.tp_tensor_use_count(t)
managed = lib.tp_to_dlpack_unversioned(t)
check(managed, "tp_to_dlpack_unversioned")
check(lib.tp_tensor_use_count(t) == before + 1, "the export holds the tensor")
# The capsule has no destructor of its own: the consumer calls the deleter.
arr = np.from_dlpack(Exported(api.PyCapsule_New(managed, b"dltensor", None)))
check(arr.shape == (4, 3), f"shape {arr.shape}")
check(arr.strides == (4, 16), f"strides {arr.strides} (bytes)")
check(arr.dtype == np.float32, f"dtype {arr.dtype}")
check(arr[1, 2] == 9.0, f"arr[1, 2] = {arr[1, 2]}")
check(arr.ctypes.data == lib.tp_tensor_data(t), "zero-copy")
arr_values = arr.copy()
ctypes.cast(lib.tp_tensor_data(a), ctypes.POINTER(ctypes.c_float))[5] = 50.0  # a[5] = m[1][1] = t[1][1]
check(arr[1, 1] == 50.0, "NumPy sees a write made through the runtime")
del arr
check(lib.tp_tensor_use_count(t) == before, "NumPy ran the deleter when the array went")
for x in (t, m, a):
    lib.tp_tensor_release(x)

# --- NumPy -> libtensorplay: zero-copy, strided, the capsule marked used
src = np.arange(20, dtype=np.float64).reshape(4, 5)[:, ::2]  # strides (40, 16) bytes
cap = src.__dlpack__()
ptr = P(api.PyCapsule_GetPointer(cap, b"dltensor"))
u = lib.tp_from_dlpack_unversioned(ctypes.byref(ptr))
check(u, "tp_from_dlpack_unversioned: " + lib.tp_last_error().decode())
check(not ptr.value, "the struct pointer was consumed (set to NULL)")
api.PyCapsule_SetName(cap, b"used_dltensor")  # the protocol: its destructor now leaves it alone
del cap
check(lib.tp_tensor_data(u) == src.ctypes.data, "zero-copy import")
check(get(u, 3, 2) == 19.0, f"u[3][2] = {get(u, 3, 2)}")
src[2, 1] = -7.0
check(get(u, 2, 1) == -7.0, "the runtime sees a write made through NumPy")
base = src.base
del src
check(get(u, 1, 1) == 7.0, "the runtime's reference keeps NumPy's memory alive")
lib.tp_tensor_release(u)

# --- a second consumption of the same struct pointer is refused
again = lib.tp_from_dlpack_unversioned(ctypes.byref(ptr))
check(not again, "a consumed struct cannot be imported twice")
check(b"consumed only once" in lib.tp_last_error(), lib.tp_last_error())

print("ok" if failures == 0 else f"{failures} failure(s)")
sys.exit(1 if failures else 0)
