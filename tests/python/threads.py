# Threads allocating in functions of their own: each allocation names its
# own thread's Python frames, never another thread's.
import os
import threading

kept = []
lock = threading.Lock()


def work_a():
    for _ in range(200):
        b = bytearray(100_003)  # WORK_A
        with lock:
            kept.append(b)


def work_b():
    for _ in range(200):
        b = bytearray(100_019)  # WORK_B
        with lock:
            kept.append(b)


def work_c():
    for _ in range(200):
        b = bytearray(100_043)  # WORK_C
        with lock:
            kept.append(b)


ts = [threading.Thread(target=f) for f in (work_a, work_b, work_c)]
for t in ts:
    t.start()
for t in ts:
    t.join()
os._exit(0)
