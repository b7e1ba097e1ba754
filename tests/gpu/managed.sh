# managed.sh - the `managed` section of scripts/gpu-suite (sourced; uses $bin, $kairos,
# $python, $OUT, value()). Managed memory (cudaMallocManaged) under Kairos on the GPU,
# with a private kairosd whose tenants say managed: refuse (the default) or charge:
#   g1. refused by default: tenant 'strict' asks 1 GiB of managed memory: the error
#       CUDA returns, the shim's line saying what to do, a plain cudaMalloc after it
#       still works; nothing charged for it
#   g2. charged in full: tenant 'open' (managed: charge, 8 GiB) asks 4 GiB and touches
#       all of it: what kairos ps holds for it minus what the same program holds
#       asking none (the managed charge, 4096 MiB expected), what the GPU took, and
#       what NVML attributes to the process (whether the audit can see managed pages)
#   g3. beyond the quota: 'open' asks 10 GiB: refused (cudaErrorMemoryAllocation)
#   g4. a __managed__ variable (tests/gpu/managed_var.cu) in tenants 'strict' and
#       'open': what the program sees when CUDA maps it at module load
#   g5. next to a neighbour, natively then under kairosd: a process holds 32 GiB of
#       managed memory it keeps touching; 5 s later a neighbour allocates plain 1 GiB
#       blocks until refused. Natively the driver evicts the managed pages for it
#       (measured 2026-12-02). Under kairosd the managed tenant 'big' (40 GiB,
#       charge) and the neighbour 'plain' (100 GiB) have quotas that fit the GPU
#       together: expected, the neighbour stops at its quota and nothing is evicted.
# About 2.5 minutes. Writes $OUT/managed/*; prints RESULT lines and a table.
. tests/gpu/kairosd_env.sh
. tests/gpu/cuda_tool.sh
md=$OUT/managed
mkdir -p "$md"
mn=$(cuda_tool managed_neighbour tests/gpu/probe/managed_neighbour.cu)
mv=$(cuda_tool managed_var tests/gpu/managed_var.cu)
kd=/tmp/kairos-managed
rm -rf "$kd" && mkdir -p "$kd"
kairosd_private "$kd" "$md/kairosd.log" <<YAML
  - name: strict
    memory: { 0: 8G }
  - name: open
    memory: { 0: 8G }
    managed: charge
  - name: big
    memory: { 0: 40G }
    managed: charge
  - name: plain
    memory: { 0: 100G }
YAML
: > "$md/results.txt"
mresult() { echo "RESULT $*" | tee -a "$md/results.txt"; }
mheld() { "$kairos" ps --json | $python -c "import json,sys; d=json.load(sys.stdin); print(sum(g['held'] for t in d['tenants'] if t['name']=='$1' for g in t['gpus']) >> 20)"; }
mused() { env -u LD_PRELOAD nvidia-smi -i 0 --query-gpu=memory.used --format=csv,noheader,nounits; }
# mrun TENANT FILE ARGS...: the tenant role in the background; waits for "holding"
mrun() {
  local t=$1 f=$2
  shift 2
  "$kairos" run --tenant "$t" -- "$mn" tenant "$@" > "$f" 2>&1 &
  mpid=$!
  for _ in $(seq 300); do grep -q '^holding' "$f" 2>/dev/null && break; sleep 0.1; done
}
field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" "$2" | head -1; }

echo "--- g1. managed memory refused by default (tenant 'strict')"
mrun strict "$md/g1.txt" 1024 2
held_g1=$(mheld strict); wait "$mpid"; rc=$?
cat "$md/g1.txt"
mresult "managed_refused managed=$(field managed "$md/g1.txt") plain=$(field plain "$md/g1.txt") exit=$rc held_mib=$held_g1 shim_line=$(grep -c 'managed memory (cudaMallocManaged) refused' "$md/g1.txt")"

echo "--- g2. charged in full (tenant 'open', managed: charge): 4096 MiB, touched"
used0=$(mused)
mrun open "$md/g2-base.txt" 0 2
held_base=$(mheld open); wait "$mpid"
mrun open "$md/g2.txt" 4096 4
held_g2=$(mheld open); used_g2=$(mused)
# what NVML attributes to the process (can the audit see managed memory?)
apps_g2=$(env -u LD_PRELOAD nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits | tr '\n' ';' | tr -d ' ')
wait "$mpid"; rc=$?
sleep 0.5
held_after=$(mheld open)
cat "$md/g2.txt"
mresult "managed_charged managed=$(field managed "$md/g2.txt") touched=$(field touched "$md/g2.txt") exit=$rc held_without_mib=$held_base held_with_mib=$held_g2 charge_mib=$((held_g2 - held_base)) gpu_used_delta_mib=$((used_g2 - used0)) nvml_apps=${apps_g2:-none} held_after_exit_mib=$held_after"

echo "--- g3. beyond the quota (tenant 'open', 8 GiB): 10240 MiB"
mrun open "$md/g3.txt" 10240 1
wait "$mpid"
cat "$md/g3.txt"
mresult "managed_over_quota managed=$(field managed "$md/g3.txt") plain=$(field plain "$md/g3.txt")"

echo "--- g4. a __managed__ variable in tenants 'strict' and 'open'"
for t in strict open; do
  timeout 60 "$kairos" run --tenant "$t" -- "$mv" > "$md/g5-$t.txt" 2>&1; rc=$?
  cat "$md/g5-$t.txt"
  mresult "managed_var_$t value=$(field managed_var "$md/g5-$t.txt") error=$(field managed_var_error "$md/g5-$t.txt") exit=$rc"
done

echo "--- g5. next to a neighbour: natively, then under kairosd ('big' 40 GiB charge, 'plain' 100 GiB)"
timeout 60 "$mn" hold 32768 14 > "$md/native-hold.txt" 2>&1 &
hp=$!
sleep 5
timeout 40 "$mn" fill 160000 > "$md/native-fill.txt" 2>&1
wait "$hp"; native_hold_rc=$?
timeout 60 "$kairos" run --tenant big -- "$mn" hold 32768 14 > "$md/kairos-hold.txt" 2>&1 &
hp=$!
sleep 5
held_big=$(mheld big)
timeout 40 "$kairos" run --tenant plain -- "$mn" fill 160000 > "$md/kairos-fill.txt" 2>&1
wait "$hp"; kairos_hold_rc=$?
slowest() { awk '/^pass/ && $2 != "0" {sub("ms=", "", $3); if ($3 > m) m = $3} END {print m + 0}' "$1"; }
errors() { grep -c 'error=' "$1"; }
for w in native kairos; do
  tail -3 "$md/$w-hold.txt"; cat "$md/$w-fill.txt"
done
mresult "managed_neighbour_native filled_mib=$(field filled_mib "$md/native-fill.txt") hold_exit=$native_hold_rc hold_errors=$(errors "$md/native-hold.txt") slowest_pass_after_first_ms=$(slowest "$md/native-hold.txt")"
mresult "managed_neighbour_kairos filled_mib=$(field filled_mib "$md/kairos-fill.txt") hold_exit=$kairos_hold_rc hold_errors=$(errors "$md/kairos-hold.txt") slowest_pass_after_first_ms=$(slowest "$md/kairos-hold.txt") big_held_mib=$held_big"

kill "$kd_pid"; wait "$kd_pid" 2>/dev/null
unset KAIROS_SOCKET KAIROS_SHIM_CONF
grep -E "managed" "$md/kairosd.log" | head -5
echo "--- managed memory: summary"
printf '%-28s %s\n' check result
sed 's/^RESULT //' "$md/results.txt" | while read -r name rest; do printf '%-28s %s\n' "$name" "$rest"; done
