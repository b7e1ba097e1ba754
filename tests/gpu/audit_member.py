#!/usr/bin/env python3
"""A member of a kairosd tenant that takes GPU memory without the shim, for the audit
section of the GPU suite (tests/gpu/audit.sh): it registers with kairosd (HELLO, the
protocol's own client), then creates a CUDA context and allocates MIB through the
driver API (libcuda.so.1 through ctypes: no nvcc, no torch), so the memory is in
NVML's process list but was never charged to the tenant. Several of them together
exceed their tenant's quota, which only the audit's per-tenant sum can see.
With SOCKET "-" it does not register (run it under the shim: kairos run), and with
MIB "fill" it allocates 64 MiB blocks until refused: a tenant at its quota, which
the audit must not report.
Usage: audit_member.py SOCKET TENANT MIB|fill [SECONDS]"""
import ctypes
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "system"))
import kairos_proto as kp  # noqa: E402


def check(rc, what):
    if rc != 0:
        sys.exit(f"audit_member: {what} failed: CUDA error {rc}")


def main():
    sock, tenant, mib = sys.argv[1], sys.argv[2], sys.argv[3]
    seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 60
    client = None
    if sock != "-":
        client = kp.Client(sock)
        client.hello(tenant)
    cuda = ctypes.CDLL("libcuda.so.1")
    check(cuda.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    check(cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ctx = ctypes.c_void_p()
    check(cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev), "cuCtxCreate")
    ptr = ctypes.c_uint64()
    if mib == "fill":
        got = 0
        while cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(64 << 20)) == 0:
            got += 64
    else:
        got = int(mib)
        check(cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(got << 20)), "cuMemAlloc")
    print(f"audit_member: pid={os.getpid()} tenant={tenant} allocated_mib={got}", flush=True)
    time.sleep(seconds)
    if client:
        client.close()


if __name__ == "__main__":
    main()
