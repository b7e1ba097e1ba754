# driver.sh - the driver section of scripts/gpu-suite (sourced; uses $stream, $OUT,
# $python and the exported KAIROS_SHIM): the shim's verdict on this node's driver
# (docs/drivers.md). On a supported branch a process under a quota runs and sees its
# quota as the GPU's size, with no refusal line; the handshake path is taken by
# nvidia-smi (NVML makes it), the /proc path by CUDA 13's libcuda (kernel_stream,
# PyTorch). Prints "driver: ok" or "driver: FAILED" last.
echo "--- driver: the shim's verdict on this driver"
ddir=$OUT/driver
mkdir -p "$ddir"
head -1 /proc/driver/nvidia/version | tee "$ddir/proc-version.txt"
driver_ok=1
KAIROS_MEM=1G LD_PRELOAD=$KAIROS_SHIM "$stream" --seconds 0 --alloc-mib 256 \
  > "$ddir/kernel-stream.txt" 2>&1
driver_rc=$?
[ "$driver_rc" = 0 ] || driver_ok=0
echo "driver: kernel_stream under a 1 GiB quota: exit $driver_rc"
KAIROS_MEM=1G LD_PRELOAD=$KAIROS_SHIM nvidia-smi --query-gpu=memory.total \
  --format=csv,noheader > "$ddir/nvidia-smi.txt" 2>&1 || driver_ok=0
echo "driver: nvidia-smi under a 1 GiB quota says $(head -1 "$ddir/nvidia-smi.txt")"
grep -q "^1024 MiB" "$ddir/nvidia-smi.txt" || driver_ok=0
KAIROS_MEM=1G LD_PRELOAD=$KAIROS_SHIM $python -c \
  'import torch; x = torch.ones(1 << 20, device="cuda"); print("torch sum", int(x.sum()))' \
  > "$ddir/torch.txt" 2>&1 || driver_ok=0
echo "driver: $(grep -h "torch sum" "$ddir/torch.txt")"
if grep -h "NVIDIA driver" "$ddir"/*.txt; then driver_ok=0; fi
[ "$driver_ok" = 1 ] && echo "driver: ok" || echo "driver: FAILED"
