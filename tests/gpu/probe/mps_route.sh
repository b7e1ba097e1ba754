#!/usr/bin/env bash
# mps_route.sh - what space mode must know about libcuda and the MPS control daemon
# before it is designed (issue 24); a probe, not a test. Needs a GPU, nvidia-cuda-mps-control
# and python3 with torch; PROBE=the built mps_env_probe.so; logs under $OUT/mps-route.
#  1 order: when libcuda reads CUDA_MPS_* against when it opens /dev/nvidiactl
#  2 answer: a client whose environment names no pipe, routed by getenv's answer alone
#  3 forged: the environment names a wrong pipe, getenv answers the right one
#  4 control: what the control daemon's log and get_client_list say about clients
#  5 restart: the control daemon killed (SIGKILL) under a busy client, then started again
set -u
PROBE=${PROBE:?}; STREAM=${STREAM:-.carry/bin/kernel_stream}
o=${OUT:-/tmp}/mps-route; mkdir -p "$o"
d=$(mktemp -d /tmp/mpsr.XXXXXX); pipe=$d/pipe; logd=$d/log; mkdir -p "$pipe" "$logd"
ctl() { CUDA_MPS_PIPE_DIRECTORY=$pipe CUDA_MPS_LOG_DIRECTORY=$logd nvidia-cuda-mps-control "$@"; }
wait_for() { local i; for i in $(seq 1 100); do eval "$1" && return 0; sleep 0.1; done; return 1; }
cleanup() { echo quit | ctl >/dev/null 2>&1; sleep 1; pkill -9 -f "nvidia-cuda-mps-server" 2>/dev/null
            cp -r "$logd" "$o/control-log" 2>/dev/null; rm -rf "$d"; }
trap cleanup EXIT
ctl -d; wait_for "[ -e $pipe/control ]"; ls -la "$pipe" > "$o/pipe-ls.txt"
py='import torch,os,time; x=torch.ones(1<<20,device="cuda"); torch.cuda.synchronize(); print("ok",x.sum().item(),flush=True); time.sleep(float(os.environ.get("HOLD","0")))'
echo "== 1 order"
MPS_PROBE_LOG=$o/order-env.log CUDA_MPS_PIPE_DIRECTORY=$pipe LD_PRELOAD=$PROBE python3 -c "$py"
grep -n "nvidiactl\|MPS\|pipe\|mps" "$o/order-env.log" | head -40
echo "== 2 answer (no pipe in the environment)"
HOLD=3 MPS_PROBE_LOG=$o/order-answer.log MPS_PROBE_PIPE=$pipe MPS_PROBE_PRIO=1 MPS_PROBE_PCT=50 \
  LD_PRELOAD=$PROBE python3 -c "$py" & c=$!
wait_for "grep -q 'ok' /proc/$c/fd/1 2>/dev/null || [ -n \"\$(echo get_server_list | ctl)\" ]"
sleep 1.5
srv=$(echo get_server_list | ctl); echo "servers: [$srv]"
for s in $srv; do echo "clients of $s: [$(echo "get_client_list $s" | ctl)]"; ps -o pid,ppid,user,comm -p "$s"; done
echo "python pid $c"; ls -l /proc/$c/fd 2>/dev/null | grep -v "/dev/pts\|pipe:\[" | tail -40
grep -i "mps\|nvidia" /proc/$c/maps | awk '{print $6}' | sort -u | head
grep "$pipe" /proc/net/unix | head
wait $c; echo "exit $?"
grep -c . "$o/order-answer.log"; grep -n "MPS\|pipe" "$o/order-answer.log" | head -20
echo "== 3 forged environment, getenv answers the real pipe"
MPS_PROBE_LOG=$o/order-forged.log MPS_PROBE_PIPE=$pipe CUDA_MPS_PIPE_DIRECTORY=/nonexistent \
  LD_PRELOAD=$PROBE python3 -c "$py"; echo "exit $?"
echo "== 3b no probe, wrong pipe"
CUDA_MPS_PIPE_DIRECTORY=/nonexistent python3 -c "$py"; echo "exit $?"
echo "== 4 control log"; tail -30 "$logd/control.log"
echo "== 5 control daemon SIGKILLed under a busy client"
CUDA_MPS_PIPE_DIRECTORY=$pipe "$STREAM" --seconds 6 > "$o/busy.txt" 2>&1 & b=$!
sleep 2; cpid=$(pgrep -f "nvidia-cuda-mps-control -d" | head -1); echo "control pid $cpid"
ps -eo pid,ppid,comm | grep -i mps
kill -9 "$cpid"; sleep 0.5; ps -eo pid,ppid,comm | grep -i mps
wait $b; echo "busy client exit $?"; cat "$o/busy.txt"
ls -la "$pipe"
ctl -d; sleep 1; ps -eo pid,ppid,comm | grep -i mps
CUDA_MPS_PIPE_DIRECTORY=$pipe timeout 30 "$STREAM" --seconds 1 > "$o/after.txt" 2>&1; echo "after restart exit $?"
cat "$o/after.txt"; echo "servers now: [$(echo get_server_list | ctl)]"
