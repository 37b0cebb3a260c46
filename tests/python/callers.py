# One function called from two lines of another in turn, each call making
# several allocations from C (zlib's compressor state) at one instruction:
# the callee's frame is at the same address, at the same instruction, every
# time, and only its caller's line tells the calls apart: a recorder that
# reused a thread's last Python frames on the innermost one alone would
# name both calls by one line.
import zlib

DATA = bytes(range(256)) * 64


def make():
    return zlib.compress(DATA)  # MAKE


def two():
    a = make()  # FIRST
    b = make()  # SECOND
    return a, b


kept = [two() for _ in range(50)]
