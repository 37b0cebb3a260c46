# A pure-Python allocation-heavy loop for measuring the recorder's cost
# (bench/python_frames.sh): objects over pymalloc's 512-byte limit go to
# malloc, a few levels of Python calls deep.
import sys


def make(i):
    return bytearray(600 + i % 300)


def churn(n):
    keep = []
    for i in range(n):
        keep.append(make(i))
        if len(keep) > 1000:
            keep.clear()
    return len(keep)


def run(n):
    return churn(n)


run(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
