"""ipc_pair.py - CUDA IPC between two processes, for the GPU suite (memory m11).

  ipc_pair.py export DIR MIB   allocates MIB MiB (cuMemAlloc), writes its IPC handle
                               to DIR/handle, waits for DIR/opened, then exits
                               without freeing
  ipc_pair.py import DIR SECS  opens the handle (cuIpcOpenMemHandle), writes
                               DIR/opened, keeps the mapping SECS seconds, exits
  ipc_pair.py share-free DIR MIB  as export, but frees the memory once DIR/opened
                               exists (writes DIR/freed), waits for DIR/done, then
                               allocates MIB MiB again (prints realloc_ok=1 or 0)
  ipc_pair.py churn DIR MIB N  N times: allocate MIB MiB, share it
                               (cuIpcGetMemHandle), free it; prints churned=K (done
                               before the first failure) and rc (its CUresult)

Through the driver API with ctypes, so it needs nothing but libcuda. Run each under
its own tenant to see who is charged for memory the importer keeps alive after the
exporter left (docs/memory.md, CUDA IPC).
"""
import ctypes
import os
import sys
import time


class IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


def cuda():
    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuIpcOpenMemHandle_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), IpcHandle,
                                          ctypes.c_uint]
    check(lib.cuInit(0), "cuInit")
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    check(lib.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    check(lib.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev), "cuCtxCreate")
    return lib


def check(rc, what):
    if rc != 0:
        print(f"ipc_pair: {what} failed: CUresult {rc}", flush=True)
        os._exit(1)


def export(d, mib):
    lib = cuda()
    ptr = ctypes.c_uint64()
    check(lib.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(mib << 20)), "cuMemAlloc")
    h = IpcHandle()
    check(lib.cuIpcGetMemHandle(ctypes.byref(h), ptr), "cuIpcGetMemHandle")
    with open(os.path.join(d, "handle.tmp"), "wb") as f:
        f.write(ctypes.string_at(ctypes.addressof(h), 64))  # h.reserved stops at a NUL
    os.rename(os.path.join(d, "handle.tmp"), os.path.join(d, "handle"))
    print(f"exporter={os.getpid()} allocated_mib={mib}", flush=True)
    for _ in range(600):
        if os.path.exists(os.path.join(d, "opened")):
            break
        time.sleep(0.05)
    os._exit(0)  # without freeing: the importer's mapping keeps the memory


def wait_for(path):
    for _ in range(1200):
        if os.path.exists(path):
            return
        time.sleep(0.05)


def alloc_shared(lib, mib):
    ptr, h = ctypes.c_uint64(), IpcHandle()
    rc = lib.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(mib << 20))
    if rc == 0:
        rc = lib.cuIpcGetMemHandle(ctypes.byref(h), ptr)
    return rc, ptr, h


def share_free(d, mib):
    lib = cuda()
    rc, ptr, h = alloc_shared(lib, mib)
    check(rc, "cuMemAlloc or cuIpcGetMemHandle")
    with open(os.path.join(d, "handle.tmp"), "wb") as f:
        f.write(ctypes.string_at(ctypes.addressof(h), 64))
    os.rename(os.path.join(d, "handle.tmp"), os.path.join(d, "handle"))
    wait_for(os.path.join(d, "opened"))
    check(lib.cuMemFree_v2(ptr), "cuMemFree")
    print(f"exporter={os.getpid()} allocated_mib={mib} freed=1", flush=True)
    open(os.path.join(d, "freed"), "w").close()
    wait_for(os.path.join(d, "done"))
    again = ctypes.c_uint64()
    rc = lib.cuMemAlloc_v2(ctypes.byref(again), ctypes.c_size_t(mib << 20))
    print(f"realloc_ok={int(rc == 0)} realloc_rc={rc}", flush=True)
    os._exit(0)


def churn(mib, n):
    lib = cuda()
    done, rc = 0, 0
    for _ in range(n):
        rc, ptr, _h = alloc_shared(lib, mib)
        if rc == 0:
            rc = lib.cuMemFree_v2(ptr)
        if rc != 0:
            break
        done += 1
    print(f"churned={done} rc={rc}", flush=True)
    os._exit(0)


def import_(d, seconds):
    lib = cuda()
    path = os.path.join(d, "handle")
    for _ in range(600):
        if os.path.exists(path):
            break
        time.sleep(0.05)
    h = IpcHandle()
    raw = open(path, "rb").read()[:64]
    ctypes.memmove(ctypes.addressof(h), raw, len(raw))
    ptr = ctypes.c_uint64()
    check(lib.cuIpcOpenMemHandle_v2(ctypes.byref(ptr), h, 1), "cuIpcOpenMemHandle")
    open(os.path.join(d, "opened"), "w").close()
    print(f"importer={os.getpid()} opened=1", flush=True)
    time.sleep(seconds)
    os._exit(0)


if __name__ == "__main__":
    role, d, n = sys.argv[1], sys.argv[2], sys.argv[3]
    if role == "export":
        export(d, int(n))
    elif role == "share-free":
        share_free(d, int(n))
    elif role == "churn":
        churn(int(n), int(sys.argv[4]))
    else:
        import_(d, float(n))
