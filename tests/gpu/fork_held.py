"""fork_held.py - memory a forked child keeps after its parent exits (GPU suite, memory m9).

The parent allocates 1 GiB, forks a child that keeps the inherited descriptors and
sleeps CHILD_SECONDS without touching CUDA, and exits at once without freeing. The
driver frees the memory only when the child's descriptors close; m9 reads what
kairosd's ledger and NVML say in between.
Usage: fork_held.py CHILD_SECONDS
"""
import os
import sys
import time

import torch


def main():
    child_seconds = float(sys.argv[1])
    x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    pid = os.fork()
    if pid == 0:
        time.sleep(child_seconds)
        os._exit(0)
    print(f"parent={os.getpid()} child={pid} allocated_mib={x.numel() >> 20}", flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
