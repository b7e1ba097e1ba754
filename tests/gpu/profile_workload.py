#!/usr/bin/env python3
"""Workloads for `kairos profile` in the GPU suite's profile section. Each runs a warm-up,
then as many steps as fit in --seconds, and prints throughput=<items per second> (the
line kairos profile reads). Peak memory is left to kairos profile (NVML's used memory).
With --ready FILE (tests/gpu/planned_bench.py, several workloads measured together), the
warm-up done it writes FILE and waits up to --go-timeout seconds for FILE's folder to hold
"go", then measures over the same --seconds as the others (after --settle seconds of
unmeasured steps: the scheduler's settling left out); --dry-run: no torch, no GPU
(a sleep per step of --dry-step-ms, tests/system/test_planned_bench.py).
  resnet50-inf   ResNet-50 inference, fp16, --batch images per step (images/s)
  transformer-train  one training step of a 6-layer transformer encoder (sequences/s)
  membound       a streaming a = b + c over 1 GiB arrays (GiB/s moved)
Usage: profile_workload.py KIND [--batch B] [--seconds S] [--ready FILE] [--dry-run]"""
import argparse
import os
import sys
import time

if "--dry-run" not in sys.argv:
    import torch
    import torch.nn as nn
else:
    torch = nn = None


class Bottleneck(nn.Module if nn else object):
    def __init__(self, cin, mid, stride):
        super().__init__()
        cout = mid * 4
        self.body = nn.Sequential(
            nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
            nn.Conv2d(mid, mid, 3, stride, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
            nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.skip = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                     if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x):
        return torch.relu(self.body(x) + self.skip(x))


def resnet50():
    """torchvision's ResNet-50 when installed, else the same architecture built here."""
    try:
        import torchvision
        return torchvision.models.resnet50()
    except ImportError:
        layers, cin = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                       nn.MaxPool2d(3, 2, 1)], 64
        for mid, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for b in range(blocks):
                layers.append(Bottleneck(cin, mid, stride if b == 0 else 1))
                cin = mid * 4
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000)]
        return nn.Sequential(*layers)


def dry_mps_client():
    """A dry run asks getenv for the MPS pipe folder as libcuda does when it starts (so
    that a preloaded shim routes it) and, where one is named, adds its pid to the folder's
    clients file, from which the stand-in control daemon (tests/stand-ins) answers."""
    import ctypes
    getenv = ctypes.CDLL(None).getenv
    getenv.restype = ctypes.c_char_p
    pipe = getenv(b"CUDA_MPS_PIPE_DIRECTORY")
    if pipe and os.path.isdir(pipe):
        with open(os.path.join(pipe.decode(), "clients"), "a") as f:
            f.write(f"{os.getpid()}\n")


def wait_go(ready, timeout):
    """Writes READY, then waits for "go" beside it (written by the bench once every
    workload is ready); exits with status 1 if it does not come within TIMEOUT seconds."""
    with open(ready + ".new", "w") as f:
        f.write(f"pid={os.getpid()}\n")
    os.rename(ready + ".new", ready)
    go, deadline = os.path.join(os.path.dirname(ready), "go"), time.time() + timeout
    while not os.path.exists(go):
        if time.time() > deadline:
            sys.exit(f"no go after {timeout:.0f} s")
        time.sleep(0.005)


def measure(step, items, args, sync=lambda: torch.cuda.synchronize(), warmup=3):
    for _ in range(warmup):
        step()
    sync()
    if args.ready:
        wait_go(args.ready, args.go_timeout)
    settle_end = time.perf_counter() + args.settle
    while time.perf_counter() < settle_end:  # running, not yet measured
        step()
        sync()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < args.seconds:
        step()
        sync()
        n += 1
    return n * items / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=["resnet50-inf", "transformer-train", "membound"])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--ready", metavar="FILE", help="written after the warm-up; then wait for go")
    ap.add_argument("--go-timeout", type=float, default=180)
    ap.add_argument("--settle", type=float, default=0,
                    help="seconds of steps before the measured ones (after go, if any)")
    ap.add_argument("--dry-run", action="store_true", help="no torch, no GPU")
    ap.add_argument("--dry-step-ms", type=float, default=10)
    a = ap.parse_args()
    if a.dry_run:
        dry_mps_client()
        thr = measure(lambda: time.sleep(a.dry_step_ms / 1000), a.batch, a, sync=lambda: None)
        print(f"kind={a.kind} batch={a.batch} dry_run=1")
        print(f"throughput={thr:.3f}")
        return
    dev = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    if a.kind == "resnet50-inf":
        net = resnet50().to(dev).half().eval()
        x = torch.randn(a.batch, 3, 224, 224, device=dev, dtype=torch.half)

        def step():
            with torch.inference_mode():
                net(x)
        thr = measure(step, a.batch, a)
    elif a.kind == "transformer-train":
        layer = nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True)
        net = nn.Sequential(nn.TransformerEncoder(layer, 6), nn.Linear(512, 512)).to(dev)
        opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
        x = torch.randn(a.batch, 256, 512, device=dev)

        def step():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = net(x).float().pow(2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        thr = measure(step, a.batch, a)
    else:
        n = (1 << 30) // 4
        b, c = torch.ones(n, device=dev), torch.ones(n, device=dev)
        out = torch.empty(n, device=dev)

        def step():
            torch.add(b, c, out=out)
        thr = measure(step, 3.0, a)   # 3 GiB moved per step
    print(f"kind={a.kind} batch={a.batch}")
    print(f"throughput={thr:.3f}")


if __name__ == "__main__":
    main()
