#!/usr/bin/env python3
"""space_end_victim.py - the process a job scheduler ends, for tests/gpu/space_end.py: an
MPS client of a fault domain (under kairosd's space mode) that keeps long fp32 matrix
products (16384 x 16384, TF32 off: about 0.1-0.2 s each on an H100 or H200) in flight
until it is signalled. Prints "pid=N" at once and "busy" once its first products are
done. --unprotect: once CUDA is up, SIGTERM goes back to the default action (replacing the
shim's handler, as a program's own signal.signal(SIGTERM, SIG_DFL) does): the control
case, a SIGTERM that ends the client with its work in flight."""
import argparse
import os
import signal

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--unprotect", action="store_true")
ap.add_argument("--size", type=int, default=16384)
args = ap.parse_args()
print(f"pid={os.getpid()}", flush=True)
torch.backends.cuda.matmul.allow_tf32 = False
a = torch.randn(args.size, args.size, device="cuda")
b = torch.randn_like(a)
c = torch.empty_like(a)
torch.cuda.synchronize()
if args.unprotect:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
said = False
while True:
    for _ in range(4):
        torch.mm(a, b, out=c)
    torch.cuda.synchronize()
    if not said:
        print("busy", flush=True)
        said = True
