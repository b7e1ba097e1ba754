#!/usr/bin/env bash
# mps_fault.sh - what the driver reports when a CUDA client faults, with and without
# MPS, and whether kairosd names the tenant (docs/space.md, "Faults"); a probe, not a
# test. Needs a GPU, nvidia-cuda-mps-control, nvcc, and the suite's carry (.carry/bin:
# kairosd, kairos, kernel_stream; .carry/lib). Logs under $OUT/mps-fault.
#  1 alone: the Xid line of a process that writes to no allocation
#  2 MPS: the same beside a busy neighbour client of the same server: which pid the
#    Xid names (the client's or the server's), what happens to the neighbour
#  3 kairosd: two tenants of one fault domain, one faulting: kairosd's fault line and
#    kairos ps's FAULTS column
set -u
bin=$PWD/.carry/bin
export LD_LIBRARY_PATH=$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export KAIROS_SHIM=$PWD/.carry/lib/libkairos.so
o=${OUT:-/tmp}/mps-fault; mkdir -p "$o"
fk=$o/fault_kernel
nvcc -arch=sm_90 -O2 -o "$fk" tests/gpu/probe/fault_kernel.cu || { echo "no nvcc"; exit 1; }
xids() { dmesg 2>/dev/null | grep "NVRM: Xid" | tail -n "$1"; }
echo "== kernel log readable by dmesg: $(dmesg >/dev/null 2>&1 && echo yes || echo no);" \
     "/dev/kmsg: $(head -c 0 /dev/kmsg 2>/dev/null && echo yes || echo no)"
echo "== 1 alone"
"$fk" --after-ms 100; echo "exit $?"; sleep 1; xids 3
echo "== 2 MPS: faulting client beside a busy neighbour"
d=$(mktemp -d /tmp/mpsf.XXXXXX); mkdir -p "$d/pipe" "$d/log"
ctl() { CUDA_MPS_PIPE_DIRECTORY=$d/pipe CUDA_MPS_LOG_DIRECTORY=$d/log nvidia-cuda-mps-control "$@"; }
ctl -d; sleep 1
CUDA_MPS_PIPE_DIRECTORY=$d/pipe "$bin/kernel_stream" --seconds 8 > "$o/neighbour.txt" 2>&1 & n=$!
sleep 3
CUDA_MPS_PIPE_DIRECTORY=$d/pipe "$fk" --after-ms 500 & f=$!
sleep 0.3; srv=$(echo get_server_list | ctl); echo "server pid(s) [$srv] faulting client $f neighbour $n"
wait $f; echo "faulting client exit $?"; wait $n; echo "neighbour exit $?"; tail -3 "$o/neighbour.txt"
sleep 1; xids 5
echo quit | ctl; sleep 1; cp -r "$d/log" "$o/mps-log"; tail -20 "$d/log/control.log"; rm -rf "$d"
echo "== 3 kairosd names the tenant"
k=$(mktemp -d /tmp/kdf.XXXXXX); chmod 755 "$k"
cat > "$k/kairosd.yaml" <<YAML
socket: $k/kairosd.sock
state: $k/state.json
admins: [0]
space: { mps_control: $(command -v nvidia-cuda-mps-control) }
tenants:
  - { name: steady, memory: { 0: 8G }, fault_domain: d1 }
  - { name: faulty, memory: { 0: 8G }, fault_domain: d1 }
  - { name: apart, memory: { 0: 8G } }
YAML
printf 'socket: %s\non_daemon_down: closed\n' "$k/kairosd.sock" > "$k/shim.conf"
export KAIROS_SHIM_CONF=$k/shim.conf KAIROS_SOCKET=$k/kairosd.sock
"$bin/kairosd" -c "$k/kairosd.yaml" > "$o/kairosd.log" 2>&1 & kd=$!
for _ in $(seq 100); do [ -S "$k/kairosd.sock" ] && break; sleep 0.05; done
"$bin/kairos" run --tenant steady -- "$bin/kernel_stream" --seconds 8 > "$o/steady.txt" 2>&1 & s=$!
"$bin/kairos" run --tenant apart -- "$bin/kernel_stream" --seconds 8 > "$o/apart.txt" 2>&1 & a=$!
sleep 3
"$bin/kairos" run --tenant faulty -- "$fk" --after-ms 500; echo "faulty exit $?"
wait $s; echo "steady exit $?"; wait $a; echo "apart exit $?"
tail -2 "$o/steady.txt" "$o/apart.txt"
"$bin/kairos" ps; "$bin/kairos" ps --json > "$o/ps.json"
grep "fault\|Xid\|space\|MPS" "$o/kairosd.log" | tail -12
kill "$kd"; wait "$kd"
for p in "$k"/mps/*/pipe; do [ -d "$p" ] && echo quit | CUDA_MPS_PIPE_DIRECTORY=$p nvidia-cuda-mps-control; done
sleep 1; rm -rf "$k"
