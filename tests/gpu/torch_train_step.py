#!/usr/bin/env python3
"""A small PyTorch training loop for the GPU suite: a convolutional network on random
images, SGD steps, bf16 autocast. Prints key=value lines (steps per second, memory
PyTorch sees) so the suite can compare runs with and without Kairos.
Usage: torch_train_step.py [--steps N] [--warmup N] [--batch B]"""
import argparse
import time

import torch
import torch.nn as nn


def model():
    return nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(128, 256, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(256, 1000))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()
    dev = torch.device("cuda")
    net = model().to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(args.batch, 3, 128, 128, device=dev)
    y = torch.randint(0, 1000, (args.batch,), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    free_b, total_b = torch.cuda.mem_get_info()
    print(f"steps={args.steps} seconds={dt:.3f} steps_per_s={args.steps / dt:.2f} "
          f"loss={loss.item():.3f}")
    print(f"mem_total_mib={total_b / 2**20:.1f} mem_free_mib={free_b / 2**20:.1f} "
          f"torch_allocated_mib={torch.cuda.memory_allocated() / 2**20:.1f}")


if __name__ == "__main__":
    main()
