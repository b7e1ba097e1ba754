#!/usr/bin/env python3
"""A stand-in for kernel_stream (tests/gpu/kernel_stream.cu) with no GPU, for the dry runs
of the GPU suite's benchmarks (tests/gpu/harm_bench.py --dry-run, which
tests/system/test_harm_bench.py runs on a CPU): the same options where they matter
(--seconds, --start-at, --stamps, --work, --batch) and the same output: it waits until
CLOCK_REALTIME --start-at, "runs" batches of --batch kernels for --seconds (a kernel of
--work N sleeps N * 1.7 ns, as 100M FMAs take about 170 ms on the H200; without --work
0.1 ms), writes every kernel's end (CLOCK_REALTIME ns, one a line) to --stamps and prints
launches=, seconds= and launches_per_s= like kernel_stream. Other options are ignored."""
import sys
import time


def options(argv):
    """kernel_stream's "--name value" pairs as a dict (it takes no flags)."""
    return {argv[i][2:]: argv[i + 1] for i in range(1, len(argv) - 1, 2)}


def main():
    o = options(sys.argv)
    kernel_s = int(o["work"]) * 1.7e-9 if "work" in o else 1e-4
    batch, run_s = int(o.get("batch", 8)), float(o.get("seconds", 3))
    print("context_s=0.0000", flush=True)
    time.sleep(max(0.0, float(o.get("start-at", 0)) - time.time()))
    ends, start = [], time.monotonic()
    while time.monotonic() - start < run_s:
        for _ in range(batch):
            time.sleep(kernel_s)
            ends.append(time.time_ns())
    elapsed = time.monotonic() - start
    print(f"launches={len(ends)} seconds={elapsed:.3f} launches_per_s={len(ends) / elapsed:.1f}")
    if "stamps" in o:
        with open(o["stamps"], "w") as f:
            f.writelines(f"{e}\n" for e in ends)


if __name__ == "__main__":
    main()
