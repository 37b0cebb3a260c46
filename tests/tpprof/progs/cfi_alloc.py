# cfi_alloc.py: allocation-heavy Python for the cfi_python scenario (preload/cfi_walk.c):
# a list of dicts kept, JSON made and parsed in a loop.
import json
def hoard(n):
    out = []
    for i in range(n):
        out.append({"k": str(i) * 3, "v": [i, i + 1]})
    return out
def churn():
    s = 0
    for i in range(2000):
        d = json.dumps({"a": list(range(i % 50))})
        s += len(json.loads(d)["a"])
    return s
x = hoard(5000)
print(churn(), len(x))
