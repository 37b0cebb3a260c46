# bench/torch_loader.py - a PyTorch DataLoader with 2 worker processes, 2
# epochs: the parent imports torch (about 700,000 distinct stacks), each
# epoch forks 2 workers that collate a few batches and are ended at the
# epoch's end. What a forked child's recording costs when it inherits a big
# recorded parent (bench/real_workloads.sh build 3 loader).
import torch
from torch.utils.data import DataLoader, TensorDataset

ds = TensorDataset(torch.randn(512, 16), torch.randint(0, 2, (512,)))
dl = DataLoader(ds, batch_size=32, num_workers=2)
s = 0.0
for epoch in range(2):
    for x, y in dl:
        s += float(x.sum())
print("done", round(s, 2))
