#!/usr/bin/env python3
"""The memory quota seen from PyTorch, for the GPU suite.
  oom:    what torch.cuda.mem_get_info shows, then 256 MiB tensors until
          torch.cuda.OutOfMemoryError, then free some and keep computing
  victim: hold most of the quota and keep allocating and computing for S seconds,
          counting failed allocations (the KRYPTON attack's victim)"""
import sys
import time

import torch

MiB = 1 << 20


def oom():
    free, total = torch.cuda.mem_get_info()
    props = torch.cuda.get_device_properties(0).total_memory
    print(f"view_total_mib={total / MiB:.1f} view_free_mib={free / MiB:.1f} "
          f"device_total_mib={props / MiB:.1f}")
    held = []
    try:
        while True:
            held.append(torch.empty(256 * MiB, dtype=torch.uint8, device="cuda"))
    except torch.cuda.OutOfMemoryError:
        print(f"oom_after_mib={len(held) * 256} error=OutOfMemoryError")
    del held[-4:]
    torch.cuda.empty_cache()
    x = torch.randn(1024, 1024, device="cuda")
    y = (x @ x).sum().item()
    print(f"works_after_oom={int(y == y)}")


def victim(seconds, hold_mib):
    hold = torch.empty(hold_mib * MiB, dtype=torch.uint8, device="cuda")
    x = torch.randn(2048, 2048, device="cuda")
    failures = iterations = 0
    t0 = time.time()
    while time.time() - t0 < seconds:
        try:
            t = torch.empty(512 * MiB, dtype=torch.uint8, device="cuda")
            (x @ x).sum().item()
            del t
            torch.cuda.empty_cache()  # give it back, so every round asks the driver again
        except torch.cuda.OutOfMemoryError:
            failures += 1
        iterations += 1
    print(f"victim iterations={iterations} failed_allocations={failures} held_mib={hold_mib}")
    del hold


if __name__ == "__main__":
    if sys.argv[1] == "oom":
        oom()
    else:
        victim(float(sys.argv[2]), int(sys.argv[3]))
