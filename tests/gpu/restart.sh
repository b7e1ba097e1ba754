# restart.sh - the `restart` section of scripts/gpu-suite (sourced; uses $bin, $kairos,
# $python, $OUT, value()). kairosd killed (-9) and started again while tenants work, as
# an upgrade or a crash would do it (issue 9: "0 OutOfMemoryError below the quota, 0
# over-grant, ledger equal to the driver after"):
#   r1. the KRYPTON attack with a restart in the middle: tenant 'victim' (16 GiB, a
#       PyTorch loop holding 14.5 GiB and allocating/freeing 512 MiB for 20 s) next
#       to 48 processes of tenant 'attacker' (8 GiB) each making a context and asking
#       1 GiB; kairosd is killed 1 s after the attackers start and started again 1 s
#       later. Counted: the victim's failed allocations, the most the ledger and the
#       GPU (NVML, per process) showed for the attackers, and what the ledger holds
#       once everything ended.
# About 40 s. Writes $OUT/restart/*; prints RESULT lines.
. tests/gpu/kairosd_env.sh
rdir=/tmp/kairos-restart
rm -rf "$rdir" && mkdir -p "$rdir" "$OUT/restart"
cat > "$rdir/kairosd.yaml" <<YAML
socket: $rdir/kairosd.sock
state: $rdir/state.json
admins: [0]
audit: { interval_ms: 0 }
tenants:
  - name: victim
    memory: { 0: 16G }
  - name: attacker
    memory: { 0: 8G }
YAML
rprobe=$bin/mem_probe
if [ ! -x "$rprobe" ] && command -v nvcc >/dev/null; then
  nvcc -arch=sm_90 -O2 -o /tmp/mem_probe tests/gpu/mem_probe.cu && rprobe=/tmp/mem_probe
fi
rlog=$OUT/restart/kairosd.log
kairosd_shim_conf "$rdir"
kairosd_start "$rdir" "$rlog"
export KAIROS_SOCKET=$rdir/kairosd.sock # kairos's own connection
r_held() { # TENANT: bytes the ledger holds for it (empty while kairosd is down)
  "$kairos" ps --json 2>/dev/null | $python -c "import json,sys; d=json.load(sys.stdin); print(sum(g['held'] for t in d['tenants'] if t['name']=='$1' for g in t['gpus']))" 2>/dev/null
}
r_gpu_others() { # PID: MiB NVML attributes to every process but PID
  env -u LD_PRELOAD nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits |
    awk -F', *' -v v="$1" '$1 != v {s += $2} END {print s + 0}'
}

echo "--- r1. kairosd killed and started again during the KRYPTON attack"
"$kairos" run --tenant victim -- $python tests/gpu/torch_oom.py victim 20 14500 > "$OUT/restart/victim.txt" 2>&1 &
victim=$!
sleep 6
vpid=$(pgrep -f "torch_oom.py victim" | head -1)
for i in $(seq 48); do
  "$kairos" run --tenant attacker -- "$rprobe" attack > "$OUT/restart/attacker-$i.txt" 2>&1 &
done
sleep 1
kill -9 "$kd_pid"; wait "$kd_pid" 2>/dev/null
sleep 1
kairosd_start "$rdir" "$rlog"
max_ledger=0; max_gpu=0
for _ in $(seq 20); do
  h=$(r_held attacker); g=$(r_gpu_others "$vpid")
  [ -n "$h" ] && [ "$h" -gt "$max_ledger" ] && max_ledger=$h
  [ "$g" -gt "$max_gpu" ] && max_gpu=$g
  sleep 0.25
done
wait $(jobs -p | grep -v "^$kd_pid$" | grep -v "^$victim$") 2>/dev/null
wait "$victim"
cat "$OUT/restart/victim.txt"
sleep 1
after_v=$(r_held victim); after_a=$(r_held attacker)
grep -E "reattach|restart|refused" "$rlog" | tail -5
echo "RESULT restart_attack victim_failed_allocations=$(value failed_allocations < "$OUT/restart/victim.txt") victim_iterations=$(value iterations < "$OUT/restart/victim.txt") attacker_max_ledger_mib=$((max_ledger / 1048576)) attacker_max_gpu_mib=$max_gpu attacker_quota_mib=8192 attacker_contexts_ok=$(cat "$OUT"/restart/attacker-*.txt | grep -c "context=ok") ledger_after_victim_mib=$((${after_v:-0} / 1048576)) ledger_after_attacker_mib=$((${after_a:-0} / 1048576))" | tee "$OUT/restart/results.txt"
kill "$kd_pid"; wait "$kd_pid" 2>/dev/null
unset KAIROS_SOCKET KAIROS_SHIM_CONF
