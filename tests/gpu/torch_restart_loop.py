#!/usr/bin/env python3
"""torch_restart_loop.py - a PyTorch training loop near its memory quota, timed in
windows, for the GPU suite's memory check m12 (kairosd killed -9 and restarted while
it runs).

An MLP of LAYERS square fp32 layers (WIDTH wide) with SGD and momentum: parameters,
gradients and momentum take 3 x LAYERS x WIDTH^2 x 4 bytes; each step draws its
batch size at random from [BATCH/2, BATCH], so the caching allocator grows, and
every FREE_EVERY steps it empties its cache, so memory is given back to the driver
and asked for again throughout (the allocations the outage must not refuse). A step
that raises torch.cuda.OutOfMemoryError is counted, its cache emptied, and the loop
goes on.

Prints "loop_started" (flushed) when the timed loop begins, so that the suite can
time the kill from it; then, after SECONDS: steps, ooms, steps_per_s in three
windows of the loop's own clock (before: [0, KILL_AT), during: [KILL_AT,
KILL_AT + 2), after: the rest) and the peak PyTorch reserved; then "holding" and
keeps its memory HOLD seconds (the suite compares the ledger with nvidia-smi
meanwhile).
Usage: torch_restart_loop.py [--seconds 10] [--kill-at 3] [--width 8192] [--layers 4]
                             [--batch 4096] [--free-every 4] [--hold 3]
"""
import argparse
import os
import random
import time

import torch
import torch.nn as nn

MiB = 1 << 20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--kill-at", type=float, default=3)
    ap.add_argument("--width", type=int, default=8192)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--free-every", type=int, default=4)
    ap.add_argument("--hold", type=float, default=3)
    args = ap.parse_args()
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = True  # a step of tens of ms, not hundreds
    layers = []
    for _ in range(args.layers):
        layers += [nn.Linear(args.width, args.width), nn.ReLU()]
    net = nn.Sequential(*layers).to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=1e-4, momentum=0.9)
    rng = random.Random(1)

    def step():
        b = rng.randint(args.batch // 2, args.batch)
        x = torch.randn(b, args.width, device=dev)
        opt.zero_grad(set_to_none=False)
        loss = net(x).square().mean()
        loss.backward()
        opt.step()
        loss.item()  # synchronises: a step is done when it returns

    for _ in range(3):  # warm-up: momentum buffers made, kernels chosen
        step()
    free_b, total_b = torch.cuda.mem_get_info()
    print(f"pid={os.getpid()} view_total_mib={total_b / MiB:.0f} view_free_mib={free_b / MiB:.0f} "
          f"reserved_mib={torch.cuda.memory_reserved() / MiB:.0f}", flush=True)
    print("loop_started", flush=True)
    t0 = time.perf_counter()
    ends = []
    ooms = 0
    peak = 0
    n = 0
    while time.perf_counter() - t0 < args.seconds:
        n += 1
        try:
            step()
            ends.append(time.perf_counter() - t0)
        except torch.cuda.OutOfMemoryError:
            ooms += 1
            torch.cuda.empty_cache()
        peak = max(peak, torch.cuda.memory_reserved())
        if n % args.free_every == 0:
            torch.cuda.empty_cache()  # back to the driver; the next step asks again
    windows = (("before", 0, args.kill_at), ("during", args.kill_at, args.kill_at + 2),
               ("after", args.kill_at + 2, args.seconds))
    rates = " ".join(f"steps_per_s_{name}={sum(lo <= e < hi for e in ends) / (hi - lo):.2f}"
                     for name, lo, hi in windows)
    print(f"steps={len(ends)} ooms={ooms} {rates} peak_reserved_mib={peak / MiB:.0f}",
          flush=True)
    print("holding", flush=True)
    time.sleep(args.hold)


if __name__ == "__main__":
    main()
