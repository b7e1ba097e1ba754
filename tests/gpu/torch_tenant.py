#!/usr/bin/env python3
"""A PyTorch tenant for the compute benchmark (tests/gpu/compute_bench.py).

Kinds of work, each a loop of units, each unit ended by a synchronisation:
  matmul  a few bf16 4096x4096 matrix products (about 1 ms of GPU time)
  train   one ResNet-50 training step on random images (SGD, bf16 autocast)
  infer   one ResNet-50 inference request (a small batch), then a short think
          time: a request stream whose latency is what the benchmark reports
  idle    makes its context and a warm matmul, then sleeps for --seconds: a live
          process that holds a context and submits nothing (an idle server)

It waits until CLOCK_REALTIME --start-at (so tenants start together, after their
warm-up), runs for --seconds, and writes one line per unit to --stamps:
"END_NS LATENCY_NS" (CLOCK_REALTIME ns when the unit ended; how long it took from
its submission). Prints key=value lines: units, units_per_s, p50_ms, p99_ms.
Usage: torch_tenant.py --kind matmul|train|infer|idle [--seconds S] [--start-at T]
                       [--stamps FILE] [--batch B] [--think-ms MS]
"""
import argparse
import time

import torch


def make_unit(kind, batch):
    dev = torch.device("cuda")
    if kind in ("matmul", "idle"):
        a = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
        b = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)

        def unit():
            for _ in range(4):
                torch.mm(a, b)
        return unit
    import torchvision
    net = torchvision.models.resnet50(weights=None).to(dev).to(memory_format=torch.channels_last)
    x = torch.randn(batch, 3, 224, 224, device=dev).to(memory_format=torch.channels_last)
    if kind == "infer":
        net.eval()

        def unit():
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                net(x)
        return unit
    y = torch.randint(0, 1000, (batch,), device=dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()

    def unit():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
    return unit


def percentile(values, q):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", choices=["matmul", "train", "infer", "idle"], required=True)
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--start-at", type=float, default=0)
    ap.add_argument("--stamps")
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--think-ms", type=float, default=10)
    args = ap.parse_args()
    batch = args.batch or {"matmul": 0, "train": 64, "infer": 8, "idle": 0}[args.kind]
    unit = make_unit(args.kind, batch)
    for _ in range(5):  # warm-up: kernels chosen, memory pooled
        unit()
    torch.cuda.synchronize()
    if args.start_at:
        margin = args.start_at - time.time()
        print(f"ready_margin_s={margin:.2f}", flush=True)  # < 0: it started late
        time.sleep(max(0.0, margin))
    stamps = []
    end = time.time() + args.seconds
    if args.kind == "idle":  # alive, its context made, nothing submitted
        time.sleep(args.seconds)
        print("kind=idle units=0 units_per_s=0 p50_ms=nan p99_ms=nan")
        return
    while time.time() < end:
        t0 = time.time_ns()
        unit()
        torch.cuda.synchronize()
        t1 = time.time_ns()
        stamps.append((t1, t1 - t0))
        if args.kind == "infer" and args.think_ms > 0:
            time.sleep(args.think_ms / 1000)
    if args.stamps:
        with open(args.stamps, "w") as f:
            f.writelines(f"{e} {lat}\n" for e, lat in stamps)
    lat_ms = [lat / 1e6 for _, lat in stamps]
    print(f"kind={args.kind} units={len(stamps)} units_per_s={len(stamps) / args.seconds:.2f} "
          f"p50_ms={percentile(lat_ms, 0.5):.3f} p99_ms={percentile(lat_ms, 0.99):.3f}")


if __name__ == "__main__":
    main()
