#!/usr/bin/env python3
"""What a PyTorch program sees of the GPUs it is given, for the multigpu section of
the GPU suite (tests/gpu/multigpu.sh). CUDA numbers the visible GPUs from 0
(CUDA_VISIBLE_DEVICES); every device number here is CUDA's.

  view              one line per visible device: its total memory as
                    cudaGetDeviceProperties and cudaMemGetInfo report it, and its PCI
                    bus id (which physical GPU CUDA's device N is)
  fill DEV HOLD_S   allocates 256 MiB blocks on device DEV until the first refusal,
                    prints what it got, then holds it HOLD_S seconds (a line
                    "holding" first, so the caller can look at kairos ps meanwhile)

Prints key=value lines.
Usage: multigpu_probe.py view | fill DEV HOLD_S
"""
import sys
import time

import torch

MiB = 1 << 20


def view():
    for d in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(d)
        free, total = torch.cuda.mem_get_info(d)
        bus = getattr(props, "pci_bus_id", None)
        print(f"device={d} total_global_mem_mib={props.total_memory // MiB} "
              f"view_total_mib={total // MiB} view_free_mib={free // MiB} pci_bus={bus}",
              flush=True)


def fill(dev, hold_s):
    torch.cuda.set_device(dev)
    blocks = []
    try:
        while True:
            blocks.append(torch.empty(256 * MiB, dtype=torch.uint8, device=f"cuda:{dev}"))
    except torch.cuda.OutOfMemoryError:
        pass
    free, total = torch.cuda.mem_get_info(dev)
    print(f"device={dev} allocated_mib={len(blocks) * 256} view_total_mib={total // MiB} "
          f"view_free_mib={free // MiB}", flush=True)
    print("holding", flush=True)
    time.sleep(hold_s)


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "view":
        view()
    elif len(sys.argv) == 4 and sys.argv[1] == "fill":
        fill(int(sys.argv[2]), float(sys.argv[3]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
