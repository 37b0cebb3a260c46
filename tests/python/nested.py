# Nested Python calls, a call back into Python from C (sorted's key), a
# generator, and a class's __init__ (3.13 runs it inline, under a shim frame
# of its own that must not show): each allocation's stack must hold the
# Python frames in order, interleaved with the native frames that ran them.
import os


def leaf(n):
    return bytearray(n)  # LEAF


def middle(n):
    return leaf(n)  # MIDDLE


def outer(n):
    return middle(n)  # OUTER


def key(x):
    kept.append(bytearray(777_001))  # KEY
    return x


def sorter():
    return sorted([3, 1, 2], key=key)  # SORTER


def gen():
    for _ in range(3):
        yield bytearray(555_001)  # GEN


def consume():
    return list(gen())  # CONSUME


class Box:
    def __init__(self):
        self.b = bytearray(444_001)  # INIT


def make_boxes():
    for _ in range(50):  # (past the call's specialization)
        kept.append(Box())  # BOXES


kept = []
for _ in range(5):
    kept.append(outer(333_001))  # TOP
sorter()
kept.extend(consume())
make_boxes()  # MAKE
os._exit(0)
