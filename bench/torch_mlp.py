"""bench/torch_mlp.py - a small PyTorch training loop, for bench/real_workloads.sh.

A 784-512-10 MLP (nn.Linear, ReLU) trained with SGD on random data for
40 steps (batch 64) on the CPU, torch.set_num_threads fixed (default 1),
seeded: the same allocations every run.  Imports torch (hundreds of modules,
a million allocations in all), which is most of what a profiler pays for.
Usage: python3 torch_mlp.py [steps] [threads]
"""
import sys

import torch
import torch.nn.functional as F

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 40
threads = int(sys.argv[2]) if len(sys.argv) > 2 else 1
torch.set_num_threads(threads)
torch.manual_seed(1)
model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
teacher = torch.randn(784, 10)
loss_value = 0.0
for _ in range(steps):
    x = torch.randn(64, 784)
    y = (x @ teacher).argmax(1)
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    loss_value = loss.item()
print(f"loss={loss_value:.4f}")
