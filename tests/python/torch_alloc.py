# A tensor allocated from a Python line (only where torch imports).
import os
import sys

try:
    import torch  # IMPORT
except Exception:
    sys.exit(77)

kept = []


def make():
    kept.append(torch.empty(3_000_017, dtype=torch.uint8))  # TENSOR


make()
os._exit(0)
