#!/bin/sh
# Fake workload: throughput = 1000 x (active-thread percentage / 100)^0.8, or per MIG
# device; records the MPS pipe directory it was given.
echo "run ${CUDA_MPS_PIPE_DIRECTORY:-none} ${CUDA_MPS_ACTIVE_THREAD_PERCENTAGE:-none} ${CUDA_VISIBLE_DEVICES:-none}" >> "$FAKE_LOG"
[ -n "$FAKE_FAIL" ] && { echo "no result"; exit 0; }
echo "warming up"
echo "throughput=1"
if [ -n "$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" ]; then
  awk -v p="$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" 'BEGIN { printf "throughput=%.6f\n", 1000 * (p / 100) ^ 0.8 }'
else
  case "$CUDA_VISIBLE_DEVICES" in MIG-a) echo "throughput=150" ;; *) echo "throughput=480" ;; esac
fi
echo "memory_mib=1234"
