"""bench/train_step_torch.py - the PyTorch side of bench/train_step.sh.

The same step as bench/train_step.c (samples/train/mlp_model.h): a
784-512-512-10 MLP (nn.Linear, ReLU), batch 256 of torch.randn data made
each step with labels argmax(x @ T), F.cross_entropy, AdamW(lr=1e-3,
betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2), zero_grad(set_to_none=True).
Prints median wall and process-CPU milliseconds per step after 3 warm-up
steps.  Usage: python3 train_step_torch.py [steps] [threads].
"""
import statistics
import sys
import time

import torch
import torch.nn.functional as F

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
threads = int(sys.argv[2]) if len(sys.argv) > 2 else 1
torch.set_num_threads(threads)
torch.manual_seed(1)
model = torch.nn.Sequential(
    torch.nn.Linear(784, 512), torch.nn.ReLU(),
    torch.nn.Linear(512, 512), torch.nn.ReLU(),
    torch.nn.Linear(512, 10))
teacher = torch.randn(784, 10)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2)


def step():
    x = torch.randn(256, 784)
    y = (x @ teacher).argmax(1)
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x), y)
    value = loss.item()
    loss.backward()
    opt.step()
    return value


for _ in range(3):
    step()
wall, cpu = [], []
loss = 0.0
for _ in range(steps):
    w0, c0 = time.perf_counter(), time.process_time()
    loss = step()
    wall.append((time.perf_counter() - w0) * 1e3)
    cpu.append((time.process_time() - c0) * 1e3)
print(f"pytorch {torch.__version__}  threads {threads}  steps {steps}  final loss {loss:.4f}")
print(f"step           wall {statistics.median(wall):.2f} ms  cpu {statistics.median(cpu):.2f} ms (medians)")
