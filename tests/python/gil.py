# Allocations made with the GIL released (ctypes releases it around a
# foreign call: malloc runs in the C library with no GIL held) while another
# thread holds it and allocates: each is named by its own thread's line.
import ctypes
import os
import threading

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
kept = []


def released():
    for _ in range(300):
        kept.append(libc.malloc(70_001))  # RELEASED


def holding():
    for _ in range(300):
        kept.append(bytearray(90_001))  # HOLDING


ts = [threading.Thread(target=released), threading.Thread(target=holding)]
for t in ts:
    t.start()
for t in ts:
    t.join()
os._exit(0)
