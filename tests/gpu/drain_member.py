#!/usr/bin/env python3
"""A newcomer to a tenant whose other member is being killed, for the audit section
of the GPU suite (tests/gpu/audit.sh, a5); run it under the shim (kairos run). It
creates its CUDA context, prints "ready", waits for the file GO to appear (the suite
creates it as it SIGKILLs the leaving member), then takes 64 MiB blocks until the
shim refuses one, and keeps retrying every 20 ms for SECONDS: each time its total
grows it prints "t_ms=T total_mib=M" (T from GO). The first line is what the tenant
had room for while the leaving member's memory was still held (or draining); the
last, once the driver had freed it.
Usage: drain_member.py GO SECONDS"""
import ctypes
import os
import sys
import time


def check(rc, what):
    if rc != 0:
        sys.exit(f"drain_member: {what} failed: CUDA error {rc}")


def main():
    go, seconds = sys.argv[1], float(sys.argv[2])
    cuda = ctypes.CDLL("libcuda.so.1")
    check(cuda.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    check(cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ctx = ctypes.c_void_p()
    check(cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev), "cuCtxCreate")
    print(f"drain_member: pid={os.getpid()} ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.002)
    t0 = time.monotonic()
    ptr = ctypes.c_uint64()
    total = 0
    while time.monotonic() - t0 < seconds:
        grew = False
        while cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(64 << 20)) == 0:
            total += 64
            grew = True
        if grew:
            print(f"drain_member: t_ms={(time.monotonic() - t0) * 1000:.0f} total_mib={total}",
                  flush=True)
        time.sleep(0.02)
    print(f"drain_member: done total_mib={total}", flush=True)


if __name__ == "__main__":
    main()
