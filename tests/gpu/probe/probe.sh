# probe.sh - the `probe` section of scripts/gpu-suite (sourced; uses $bin, $OUT,
# $kairos). Measurements that decide designs rather than check features:
#   1. what a channel's USERD (GPGet/GPPut, and the words at +0x40..+0x60) says while
#      the GPU idles, runs a deep queue, a shallow queue, a CUDA graph, one long kernel
#      and eight 100 ms kernels queued at once (userd_probe.so)
#   2. what a pause does to a kernel longer than a window: a 1 s kernel alone, then
#      under kairosd with a 30 % limit (windows), its global-timer stamps show gaps
#      if the pause preempts it
#   3. managed memory next to a neighbour: a process holding 32 GiB of managed memory
#      it keeps touching, and a neighbour that allocates plain memory until refused
#   4. MPS active-thread percentages against an SM-bound PyTorch load (a slice proxy)
# Writes $OUT/probe/*; prints the figures.
pd=$OUT/probe
mkdir -p "$pd"
echo "--- probe 1. USERD GPGet/GPPut against known work"
USERD_PROBE_OUT=$pd/userd.log LD_PRELOAD=$bin/userd_probe.so "$bin/probe_load" > "$pd/load.txt" 2>&1
echo "probe_load exit $?"
python3 tests/gpu/probe/userd_analyze.py "$pd/userd.log" "$pd/load.txt"
grep -c '^# channel' "$pd/userd.log" | sed 's/^/userd: channels placed /'

echo "--- probe 2. a 1 s kernel alone and under a 30 % limit"
"$bin/probe_load" --only long --long-ms 1000 | grep '^long' | sed 's/^/alone: /'
kd=$pd/kd
mkdir -p "$kd"
. tests/gpu/kairosd_env.sh
cat > "$kd/kairosd.yaml" <<EOF
socket: $kd/kairosd.sock
state: $kd/state.json
admins: [0]
audit: { interval_ms: 0 }
tenants:
  - name: capped
    memory: { 0: 40G }
    compute: { 0: { limit: 30% } }
  - name: other
    memory: { 0: 40G }
    compute: { 0: { share: 50% } }
EOF
kairosd_start "$kd" "$kd/kairosd.log" -l debug
kairosd_shim_conf "$kd"
KAIROS_LOG=stderr "$kairos" run --tenant capped -- \
  "$bin/probe_load" --only long --long-ms 1000 > "$pd/long-capped.txt" 2>&1
grep '^long' "$pd/long-capped.txt" | sed 's/^/limit 30%: /'
grep -i 'pause' "$pd/long-capped.txt" | tail -2
kill "$kd_pid"; wait "$kd_pid" 2>/dev/null
unset KAIROS_SHIM_CONF

echo "--- probe 3. managed memory next to a neighbour"
timeout 60 "$bin/managed_neighbour" hold 32768 14 > "$pd/managed-hold.txt" 2>&1 &
hold_pid=$!
sleep 5
timeout 40 "$bin/managed_neighbour" fill 160000 > "$pd/managed-fill.txt" 2>&1
echo "fill exit $?"
wait "$hold_pid"; echo "hold exit $?"
head -3 "$pd/managed-hold.txt"; tail -4 "$pd/managed-hold.txt"
cat "$pd/managed-fill.txt"

echo "--- probe 4. MPS active-thread percentage as a proxy for a slice's SMs"
if command -v nvidia-cuda-mps-control >/dev/null; then
  mps=$(mktemp -d)
  mkdir -p "$mps/pipe" "$mps/log"
  $python tests/gpu/probe/mps_matmul.py | sed 's/^/native: /'
  CUDA_MPS_PIPE_DIRECTORY=$mps/pipe CUDA_MPS_LOG_DIRECTORY=$mps/log nvidia-cuda-mps-control -d
  for p in 12 25 50 100; do
    CUDA_MPS_PIPE_DIRECTORY=$mps/pipe CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$p \
      $python tests/gpu/probe/mps_matmul.py | sed "s/^/mps $p%: /"
  done
  echo quit | CUDA_MPS_PIPE_DIRECTORY=$mps/pipe nvidia-cuda-mps-control
else
  echo "no nvidia-cuda-mps-control here"
fi
