# A leak in a Python function: a module-level list that `hoard` keeps
# growing, left for the exit (os._exit: no interpreter teardown frees it).
import os
import sys

kept = []


def hoard(n):
    for i in range(n):
        kept.append(bytearray(1000 + i % 7))  # LEAK


def main():
    hoard(int(sys.argv[1]) if len(sys.argv) > 1 else 20000)


main()
sys.stdout.flush()
os._exit(0)
