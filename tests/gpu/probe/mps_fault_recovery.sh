#!/usr/bin/env bash
# mps_fault_recovery.sh - whether an MPS server in its fault state takes new clients
# again once the client that faulted, still running, has its MPS client ended with
# terminate_client (docs/space.md, "After a fault"); a probe, not a test. Needs a GPU,
# nvidia-cuda-mps-control, nvcc, and the suite's carry (.carry/bin: kairosd, kairos,
# kernel_stream; .carry/lib). Logs under $OUT/mps-fault-recovery.
#  1 MPS by hand: a client faults and runs on (fault_kernel --linger-s); a new client
#    while it runs (refused?), then terminate_client of the faulted one, then a new
#    client again
#  2 kairosd with space: fault_recovery_ms: 3000: the same client in a fault domain;
#    a new member of the domain before and after kairosd ends the faulted client
set -u
bin=$PWD/.carry/bin
export LD_LIBRARY_PATH=$PWD/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
o=${OUT:-/tmp}/mps-fault-recovery; mkdir -p "$o"
fk=$o/fault_kernel
nvcc -arch=sm_90 -O2 -o "$fk" tests/gpu/probe/fault_kernel.cu || { echo "no nvcc"; exit 1; }
# a new client (the command before it: its environment or kairos run): one second of
# kernels, at most 30 s; prints its exit status and last line
n=0
newcomer() {
  n=$((n + 1))
  timeout 30 "$@" "$bin/kernel_stream" --seconds 1 > "$o/newcomer-$n.txt" 2>&1
  echo "newcomer $n exit $? ($(tail -1 "$o/newcomer-$n.txt"))"
}
echo "== 1 MPS by hand"
d=$(mktemp -d /tmp/mpsr.XXXXXX); mkdir -p "$d/pipe" "$d/log"
ctl() {
  CUDA_MPS_PIPE_DIRECTORY=$d/pipe CUDA_MPS_LOG_DIRECTORY=$d/log nvidia-cuda-mps-control "$@"
}
clients() { echo "get_client_list $1" | ctl | tr '\n' ' '; }
ctl -d; sleep 1
CUDA_MPS_PIPE_DIRECTORY=$d/pipe "$fk" --after-ms 300 --linger-s 40 > "$o/faulter.txt" 2>&1 &
f=$!
sleep 3; cat "$o/faulter.txt"
srv=$(echo get_server_list | ctl); echo "server [$srv] clients [$(clients "$srv")]"
echo "-- a new client while the faulted one runs"
newcomer env CUDA_MPS_PIPE_DIRECTORY=$d/pipe
echo "-- terminate_client $srv $f"
echo "terminate_client $srv $f" | ctl; sleep 2
echo "clients now [$(clients "$srv")];" \
     "faulter alive: $(kill -0 $f 2>/dev/null && echo yes || echo no)"
newcomer env CUDA_MPS_PIPE_DIRECTORY=$d/pipe
kill $f 2>/dev/null; wait $f
echo quit | ctl; sleep 1; cp -r "$d/log" "$o/mps-log"; tail -20 "$d/log/control.log"; rm -rf "$d"
echo "== 2 kairosd, fault_recovery_ms 3000"
k=$(mktemp -d /tmp/kdr.XXXXXX); chmod 755 "$k"
cat > "$k/kairosd.yaml" <<YAML
socket: $k/kairosd.sock
state: $k/state.json
admins: [0]
space:
  mps_control: $(command -v nvidia-cuda-mps-control)
  client_check_ms: 500
  fault_recovery_ms: 3000
tenants:
  - { name: faulty, memory: { 0: 8G }, fault_domain: d1 }
  - { name: later, memory: { 0: 8G }, fault_domain: d1 }
YAML
printf 'socket: %s\non_daemon_down: closed\n' "$k/kairosd.sock" > "$k/shim.conf"
export KAIROS_SHIM_CONF=$k/shim.conf KAIROS_SOCKET=$k/kairosd.sock
"$bin/kairosd" -c "$k/kairosd.yaml" > "$o/kairosd.log" 2>&1 & kd=$!
for _ in $(seq 100); do [ -S "$k/kairosd.sock" ] && break; sleep 0.05; done
"$bin/kairos" run --tenant faulty -- "$fk" --after-ms 300 --linger-s 40 > "$o/faulty.txt" 2>&1 &
f=$!
sleep 2; cat "$o/faulty.txt"
echo "-- a new member before kairosd's recovery"
newcomer "$bin/kairos" run --tenant later --
sleep 4
echo "-- a new member after it"
newcomer "$bin/kairos" run --tenant later --
grep "fault\|Xid\|its MPS client\|lost their work" "$o/kairosd.log" | tail -8
kill $f 2>/dev/null; wait $f
kill "$kd"; wait "$kd"
for p in "$k"/mps/*/pipe; do
  [ -d "$p" ] && echo quit | CUDA_MPS_PIPE_DIRECTORY=$p nvidia-cuda-mps-control
done
sleep 1; rm -rf "$k"
