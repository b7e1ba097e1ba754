#!/usr/bin/env python3
"""A data-parallel PyTorch job for the multigpu section of the GPU suite
(tests/gpu/multigpu.sh): DistributedDataParallel over NCCL, one process per GPU
(ranks spawned from here; this process never touches CUDA), a stack of bf16
8192x8192 linear layers, every step's gradients all-reduced across the GPUs, so a
step ends only when every GPU has done its part: the job runs at the pace of its
slowest GPU.

It warms up, waits until CLOCK_REALTIME --start-at (so neighbours start with it),
runs --seconds, and rank 0 prints key=value: steps, steps_per_s, step_ms_p50,
step_ms_p90 (wall time per step, synchronised).
Usage: ddp_step.py [--gpus N] [--seconds S] [--start-at T] [--batch B] [--layers L]
"""
import argparse
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_main(rank, args, port):
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=args.gpus)
    dev = torch.device("cuda", rank)
    layers = [torch.nn.Linear(8192, 8192, bias=False) for _ in range(args.layers)]
    model = torch.nn.Sequential(*layers).to(dev, dtype=torch.bfloat16)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-6)
    x = torch.randn(args.batch, 8192, device=dev, dtype=torch.bfloat16)

    def step():
        loss = ddp(x).float().square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()

    for _ in range(5):
        step()
    dist.barrier()
    if args.start_at:
        time.sleep(max(0.0, args.start_at - time.time()))
    dist.barrier()
    times = []
    t_end = time.time() + args.seconds
    while True:
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
        # every rank stops after the same step: rank 0 decides
        done = torch.tensor([1 if time.time() >= t_end else 0], device=dev)
        dist.broadcast(done, 0)
        if done.item():
            break
    if rank == 0:
        q = statistics.quantiles(times, n=10) if len(times) >= 10 else [times[-1]] * 9
        print(f"steps={len(times)} steps_per_s={len(times) / sum(times):.2f} "
              f"step_ms_p50={1000 * statistics.median(times):.2f} "
              f"step_ms_p90={1000 * q[8]:.2f}", flush=True)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--start-at", type=float, default=0)
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=4)
    args = ap.parse_args()
    mp.spawn(rank_main, args=(args, free_port()), nprocs=args.gpus, join=True)


if __name__ == "__main__":
    os.environ.setdefault("NCCL_DEBUG", "WARN")
    main()
