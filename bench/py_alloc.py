"""bench/py_alloc.py - a pure-Python allocation-heavy script, for bench/real_workloads.sh.

Builds and drops dicts, lists, strings and small objects from a few
hundred call sites at different depths (recursion gives distinct stacks),
so the interpreter's allocator and malloc both work hard.  Deterministic.
Usage: python3 py_alloc.py [rounds]
"""
import sys

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 30


class Node:
    __slots__ = ("key", "value", "children")

    def __init__(self, key, value):
        self.key = key
        self.value = value
        self.children = []


def build(depth, width, tag):
    node = Node(tag, {"name": f"n{tag}-{depth}", "data": list(range(width))})
    if depth > 0:
        for i in range(width):
            node.children.append(build(depth - 1, width, tag * 7 + i))
    return node


def walk(node, acc):
    acc.append(str(node.key) + node.value["name"])
    for c in node.children:
        walk(c, acc)
    return acc


def text_work(n):
    words = [("w%d" % (i * 31 % 977)) * (1 + i % 5) for i in range(n)]
    counts = {}
    for w in words:
        counts[w] = counts.get(w, 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:10]


def big_blocks(n):
    # a few large allocations (bytearray, list growth) beside the small ones
    out = []
    for i in range(n):
        out.append(bytearray(1 << (10 + i % 8)))
    return sum(len(b) for b in out)


total = 0
for r in range(rounds):
    tree = build(5, 5, r)
    total += len(walk(tree, []))
    total += len(text_work(20000))
    total += big_blocks(200)
    total += len({i: str(i) for i in range(20000)})
print(f"total={total}")
