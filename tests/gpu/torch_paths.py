"""torch_paths.py - PyTorch's expandable segments charged exactly (GPU suite, memory m7).

Usage: torch_paths.py MIB. Allocates MIB in two tensors (the second grows the same
expandable segment), frees them and empties the cache; prints, as alloc_paths does,
what the process's memory view (torch.cuda.mem_get_info: under a quota, the
ledger's figure) and the GPU (nvidia-smi memory.used, run without the shim) say
was taken and given back, in MiB.
"""
import os
import subprocess
import sys

os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
import torch  # noqa: E402  (the allocator reads its setting at import)


def gpu_used_mib():
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    out = subprocess.run(["nvidia-smi", "-i", "0", "--query-gpu=memory.used",
                          "--format=csv,noheader,nounits"], env=env, capture_output=True,
                         text=True, check=False).stdout.strip()
    return int(out) if out.isdigit() else -1


def view_free_mib():
    torch.cuda.synchronize()
    return torch.cuda.mem_get_info()[0] / 1048576


def main():
    mib = int(sys.argv[1])
    torch.empty(1, device="cuda")
    v0, g0 = view_free_mib(), gpu_used_mib()
    half = (mib // 2) << 20
    a = torch.empty(half, dtype=torch.uint8, device="cuda")
    b = torch.empty(half, dtype=torch.uint8, device="cuda")
    v1, g1 = view_free_mib(), gpu_used_mib()
    del a, b
    torch.cuda.empty_cache()
    v2, g2 = view_free_mib(), gpu_used_mib()
    print(f"path=torch_expandable ok=1 requested_mib={mib} charged_mib={v0 - v1:.0f} "
          f"gpu_taken_mib={g1 - g0} released_mib={v2 - v1:.0f} gpu_released_mib={g1 - g2}",
          flush=True)


if __name__ == "__main__":
    main()
