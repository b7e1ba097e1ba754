#!/usr/bin/env python3
"""mps_matmul.py - an SM-bound load for the probe section: bf16 8192x8192 matmuls for
1.5 s, printed as `throughput=<matmuls per second>` (under MPS it shows what an
active-thread percentage leaves of the GPU)."""
import time

import torch

a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn_like(a)
for _ in range(5):
    a @ b
torch.cuda.synchronize()
t, n = time.time(), 0
while time.time() - t < 1.5:
    for _ in range(10):
        a @ b
    torch.cuda.synchronize()
    n += 10
print(f"throughput={n / (time.time() - t):.1f}")
