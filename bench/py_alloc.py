"""bench/py_alloc.py - a pure-Python allocation-heavy script, for bench/real_workloads.sh.

Objects above pymalloc's 512 bytes go to malloc: lists of a hundred items,
dicts of dozens of keys, strings of a few hundred characters, bytes, made
and dropped from call sites at different depths (recursion: distinct
stacks), about a million malloc calls in all.  Deterministic.
Usage: python3 py_alloc.py [rounds]
"""
import sys

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 16


def leaf(i):
    row = list(range(i % 50, i % 50 + 100))         # 800+ bytes of items
    rec = {f"k{j}": j for j in range(i % 7 + 40)}    # a dict's table above 512 bytes
    text = ("x%d," % i) * (100 + i % 50)             # a string of ~400-800 chars
    return len(row) + len(rec) + len(text)


def nest(depth, i):
    if depth == 0:
        return leaf(i)
    chunk = bytes(600 + depth * 8)                   # one block per level
    return nest(depth - 1, i + depth) + len(chunk)


def churn(n):
    keep = []
    total = 0
    for i in range(n):
        total += nest(i % 12, i)
        keep.append([i] * (70 + i % 40))             # some live for a while
        if len(keep) > 2000:
            del keep[:1000]
    return total


def text_work(n):
    parts = ["%06d:%s" % (i, "ab" * (i % 300)) for i in range(n)]
    joined = "|".join(parts)
    return len(joined.split("|"))


total = 0
for r in range(rounds):
    total += churn(6000)
    total += text_work(5000)
print(f"total={total}")
