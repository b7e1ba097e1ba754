# audit.sh - the audit section of scripts/gpu-suite (sourced; uses $bin, $python, $OUT).
# kairosd with the NVML backend and the audit on GPU 0, against:
#   a1. raw_vidmem: GPU memory taken with raw ioctls and no CUDA context (not in NVML's
#       process list): reported with its pid as an opener of /dev/nvidia0 and as the
#       holder of memory.used that nothing explains;
#   a2. two members of a 4 GiB tenant holding 3 GiB each without the shim: the tenant
#       reported over its quota; then both SIGKILLed: their leaving is not reported as
#       intruders while the driver frees (the time it takes is measured);
#   a3. action kill with exemptions: a raw_vidmem of another user killed, the same
#       program under an exempt command name spared, root's nvidia-smi spared;
#   a4. a tenant's process under the shim (kairos run) filling its 2 GiB quota: must
#       not be reported over it (NVML's figure for it against the quota is printed:
#       what audit process_overhead must allow);
#   a5. a member of a 4 GiB tenant holding 2.5 GiB under the shim is SIGKILLed while a
#       newcomer of the same tenant (drain_member.py) takes all it may: what it gets at
#       once (the leaving member's memory held back while NVML lists it, then while
#       memory.used shows it: src/daemon/memory/linger.c) and when the rest comes, with
#       kairosd's log lines of that leaving.
# Changes no GPU setting; about one minute and a half. Prints a table; $OUT/audit-results.json.
adir=/tmp/kairos-audit
rm -rf "$adir" && mkdir -p "$adir" && chmod 755 "$adir"
# the shim of a4's tenant finds this kairosd through a shim.conf; kairos run --socket
# must name the same socket
. tests/gpu/kairosd_env.sh
kairosd_shim_conf "$adir"
raw=$adir/raw_vidmem
if [ -x "$bin/raw_vidmem" ]; then
  cp "$bin/raw_vidmem" "$raw"
else
  cc -std=c17 -O2 -D_GNU_SOURCE -Isrc -o "$raw" tests/gpu/raw_vidmem.c
fi
cp "$raw" "$adir/raw_exempt"
chmod 755 "$raw" "$adir/raw_exempt"
: > "$adir/results.txt"
aresult() { echo "RESULT $*" | tee -a "$adir/results.txt"; }
ms_now() { echo $(( $(date +%s%N) / 1000000 )); }
# as another user than root (the exemption for root's tools must not cover it); run
# in the background, the program takes the subshell's pid ($!)
as_other() {
  if [ "$(id -u)" != 0 ]; then exec "$@"
  elif command -v setpriv >/dev/null; then exec setpriv --reuid=65534 --regid=65534 --clear-groups "$@"
  else exec runuser -u nobody -- "$@"; fi
}
# waits up to $1 seconds for a line of the log matching $2 (grep -E); prints the ms it took
wait_log() {
  local limit=$1 text=$2 t0; t0=$(ms_now)
  while ! grep -qE -- "$text" "$adir/kairosd.log"; do
    [ $(( $(ms_now) - t0 )) -gt $((limit * 1000)) ] && { echo -1; return 1; }
    sleep 0.05
  done
  echo $(( $(ms_now) - t0 ))
}
wait_line() { # file text seconds [pid: give up when it is gone]
  for _ in $(seq $(( $3 * 20 ))); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    [ -n "${4:-}" ] && ! kill -0 "$4" 2>/dev/null && return 1
    sleep 0.05
  done; return 1
}
used_mib() { nvidia-smi -i 0 --query-gpu=memory.used --format=csv,noheader,nounits | tr -d ' '; }
reserved_mib() { nvidia-smi -i 0 --query-gpu=memory.reserved --format=csv,noheader,nounits 2>/dev/null | tr -d ' ' | grep -E '^[0-9]+$' || echo 0; }
start_kairosd() { # action exempt
  cat > "$adir/kairosd.yaml" <<YAML
socket: $adir/kairosd.sock
state: $adir/state.json
admins: [0]
audit: { interval_ms: 500, action: $1, overhead: ${overhead_mib}M, leave_grace_ms: 1000,
         exempt: $2 }
tenants:
  - name: team
    memory: { 0: 4G }
  - name: fill
    memory: { 0: 2G }
YAML
  kairosd_start "$adir" "$adir/kairosd.log" -l debug
}
stop_kairosd() { kill "$kd_pid" 2>/dev/null; wait "$kd_pid" 2>/dev/null; rm -f "$adir/kairosd.sock"; }

base_used=$(used_mib)
base_reserved=$(reserved_mib)
overhead_mib=$(( base_used + base_reserved + 512 ))
echo "--- audit: GPU 0 memory.used ${base_used} MiB, reserved ${base_reserved} MiB before; overhead allowance ${overhead_mib} MiB"
: > "$adir/kairosd.log"
start_kairosd report "[]"

echo "--- a1. raw vidmem without a CUDA context (report)"
"$raw" -m 4096 -s 60 > "$adir/raw1.txt" 2>&1 &
raw_pid=$!
wait_line "$adir/raw1.txt" allocated_mib 20 "$raw_pid"; cat "$adir/raw1.txt"
t_open=$(wait_log 10 "pid $raw_pid \(raw_vidmem\) has /dev/nvidia[0-9]+ open")
t_held=$(wait_log 10 "pid $raw_pid \(raw_vidmem\) holds /dev/nvidia[0-9]+ open while GPU 0 has")
in_nvml=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -cx " *$raw_pid *")
raw_used=$(( $(used_mib) - base_used ))
grep -F "audit: GPU 0:" "$adir/kairosd.log" | head -2
aresult "raw_vidmem method=$(sed -n 's/.*method=\([A-Z_]*\).*/\1/p' "$adir/raw1.txt") allocated_mib=$(sed -n 's/.*allocated_mib=\([0-9]*\).*/\1/p' "$adir/raw1.txt") memory_used_delta_mib=$raw_used in_nvml_list=$in_nvml opener_reported_ms=$t_open unexplained_named_ms=$t_held"
kill "$raw_pid"; wait "$raw_pid" 2>/dev/null
sleep 1.5

echo "--- a2. a tenant's processes together above its quota; then they leave"
for i in 1 2; do
  $python tests/gpu/audit_member.py "$adir/kairosd.sock" team 3072 60 > "$adir/member$i.txt" 2>&1 &
  eval "m$i=\$!"
done
wait_line "$adir/member1.txt" allocated_mib 20 "$m1"; wait_line "$adir/member2.txt" allocated_mib 20 "$m2"
cat "$adir"/member*.txt
t_sum=$(wait_log 10 "tenant team: its 2 process\(es\) together use")
# what two contexts add to memory.used beyond what NVML gives the two processes
nvml_sum=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits | \
  awk -F', *' -v a="$m1" -v b="$m2" '$1 == a || $1 == b {s += $2} END {print s + 0}')
unattributed=$(( ($(used_mib) - base_used - nvml_sum) / 2 ))
grep -F "tenant team: its" "$adir/kairosd.log" | head -1
kill -9 "$m1" "$m2"; t0=$(ms_now)
while nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -qxE " *($m1|$m2) *"; do
  [ $(( $(ms_now) - t0 )) -gt 10000 ] && break; sleep 0.02
done
freed_ms=$(( $(ms_now) - t0 ))
wait "$m1" "$m2" 2>/dev/null
sleep 2
left_reported=$(grep -cE "warn: audit: pid ($m1|$m2) .*without being a registered tenant" "$adir/kairosd.log")
aresult "tenant_sum reported_ms=$t_sum nvml_per_process_mib=$((nvml_sum / 2)) unattributed_per_context_mib=$unattributed nvml_lists_after_kill_ms=$freed_ms leaving_reported_as_intruder=$left_reported"

echo "--- a4. a tenant's process under the shim at its 2 GiB quota"
timeout 60 "$bin/kairos" run --socket "$adir/kairosd.sock" --tenant fill -- \
  $python tests/gpu/audit_member.py - fill fill 4 > "$adir/fill.txt" 2>&1 &
fill_pid=$!
wait_line "$adir/fill.txt" allocated_mib 30 "$fill_pid"; cat "$adir/fill.txt"
fpid=$(sed -n 's/.*pid=\([0-9]*\).*/\1/p' "$adir/fill.txt")
sleep 2
fill_nvml=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits | \
  awk -F', *' -v p="${fpid:-none}" '$1 == p {print $2}')
fill_reported=$(grep -c "tenant fill: its" "$adir/kairosd.log")
wait "$fill_pid" 2>/dev/null
aresult "at_quota allocated_mib=$(sed -n 's/.*allocated_mib=\([0-9]*\).*/\1/p' "$adir/fill.txt") nvml_used_mib=${fill_nvml:-?} quota_mib=2048 reported=$fill_reported"
stop_kairosd

exempt="[ raw_exempt, { user: root }, { command: nvidia-smi, user: $(id -u) } ]"
echo "--- a3. action kill, exempt: $exempt"
start_kairosd kill "$exempt"
nvidia-smi -lms 500 --query-gpu=memory.used --format=csv > "$adir/smi.txt" 2>&1 &
smi=$!
as_other "$adir/raw_exempt" -m 1024 -s 60 > "$adir/raw_exempt.txt" 2>&1 &
ex_pid=$!
wait_line "$adir/raw_exempt.txt" allocated_mib 20 "$ex_pid"
as_other "$raw" -m 1024 -s 60 > "$adir/raw3.txt" 2>&1 &
victim=$!
t0=$(ms_now)
wait_line "$adir/raw3.txt" allocated_mib 20 "$victim"
while kill -0 "$victim" 2>/dev/null && [ $(( $(ms_now) - t0 )) -lt 15000 ]; do sleep 0.05; done
wait "$victim" 2>/dev/null; victim_rc=$?
killed_ms=$(( $(ms_now) - t0 ))
sleep 2
kill -0 "$ex_pid" 2>/dev/null && ex_alive=1 || ex_alive=0
kill -0 "$smi" 2>/dev/null && smi_alive=1 || smi_alive=0
grep -E "audit: .*(killed|exempt)" "$adir/kairosd.log" | head -6
aresult "kill victim_exit=$victim_rc killed_within_ms=$killed_ms exempt_alive=$ex_alive root_nvidia_smi_alive=$smi_alive"
kill "$ex_pid" "$smi" 2>/dev/null; wait "$ex_pid" "$smi" 2>/dev/null
stop_kairosd

echo "--- a5. a leaving member's memory held back from its tenant until the GPU frees it"
start_kairosd report "[]"
a5_from=$(wc -l < "$adir/kairosd.log")
timeout 60 "$bin/kairos" run --socket "$adir/kairosd.sock" --tenant team -- \
  $python tests/gpu/audit_member.py - team 2560 60 > "$adir/leaver.txt" 2>&1 &
leaver=$!
wait_line "$adir/leaver.txt" allocated_mib 30 "$leaver"; cat "$adir/leaver.txt"
lpid=$(sed -n 's/.*pid=\([0-9]*\).*/\1/p' "$adir/leaver.txt")
rm -f "$adir/go"
timeout 60 "$bin/kairos" run --socket "$adir/kairosd.sock" --tenant team -- \
  $python tests/gpu/drain_member.py "$adir/go" 4 > "$adir/newcomer.txt" 2>&1 &
newcomer=$!
wait_line "$adir/newcomer.txt" ready 30 "$newcomer"
kill -9 "${lpid:-none}"; touch "$adir/go"
wait "$newcomer" 2>/dev/null; wait "$leaver" 2>/dev/null
cat "$adir/newcomer.txt"
tail -n +"$((a5_from + 1))" "$adir/kairosd.log" | \
  grep -E "pid ${lpid:-none}|memory.used still shows|freed the memory of departed" | cut -c12- | head -8
first=$(sed -n 's/.*t_ms=[0-9]* total_mib=\([0-9]*\).*/\1/p' "$adir/newcomer.txt" | head -1)
last=$(sed -n 's/.*t_ms=\([0-9]*\) total_mib=.*/\1/p' "$adir/newcomer.txt" | tail -1)
final=$(sed -n 's/.*done total_mib=\([0-9]*\).*/\1/p' "$adir/newcomer.txt")
a5_log=$(tail -n +"$((a5_from + 1))" "$adir/kairosd.log")
lingered=$(grep -c "still holds its memory" <<< "$a5_log")
drained=$(grep -c "memory.used still shows" <<< "$a5_log")
bound=$(grep -c "is returned to the tenant's quota" <<< "$a5_log")
aresult "drain first_fill_mib=${first:-0} full_fill_mib=${final:-0} full_at_ms=${last:--1} lingered=$lingered drained=$drained bound_hit=$bound"
stop_kairosd
cp "$adir/kairosd.log" "$OUT/audit-kairosd.log"
echo "--- audit: what kairosd said (warnings)"
grep -E "warn: audit|error" "$adir/kairosd.log" | cut -c25- | head -30

$python - "$adir" "$OUT" "$base_used" "$overhead_mib" <<'PY'
import json, sys
adir, out, base, overhead = sys.argv[1:]
res = {"memory_used_before_mib": int(base), "overhead_allowance_mib": int(overhead), "checks": {}}
for line in open(f"{adir}/results.txt"):
    name, *fields = line.split()[1:]
    res["checks"][name] = {k: v for k, v in (f.split("=", 1) for f in fields)}
json.dump(res, open(f"{out}/audit-results.json", "w"), indent=1)
c = res["checks"]
r, t, k = c.get("raw_vidmem", {}), c.get("tenant_sum", {}), c.get("kill", {})
q = c.get("at_quota", {})
d = c.get("drain", {})
ok = lambda v: "yes" if v not in (None, "-1", "") else "NO"
rows = [
    ("raw vidmem in NVML's list", "no" if r.get("in_nvml_list") == "0" else "yes",
     f"{r.get('allocated_mib')} MiB, memory.used +{r.get('memory_used_delta_mib')} MiB"),
    ("raw: opener reported, pid", ok(r.get("opener_reported_ms")), f"{r.get('opener_reported_ms')} ms"),
    ("raw: unexplained, holder named", ok(r.get("unexplained_named_ms")), f"{r.get('unexplained_named_ms')} ms"),
    ("tenant sum above quota", ok(t.get("reported_ms")), f"{t.get('reported_ms')} ms (2 x 3 GiB, quota 4 GiB)"),
    ("memory.used not in NVML per ctx", f"{t.get('unattributed_per_context_mib')}",
     f"MiB per process (NVML gave each {t.get('nvml_per_process_mib')} MiB)"),
    ("leaving members as intruders", t.get("leaving_reported_as_intruder"),
     f"NVML listed them {t.get('nvml_lists_after_kill_ms')} ms after SIGKILL"),
    ("kill: other user's raw killed", "yes" if k.get("victim_exit") == "137" else "NO",
     f"exit {k.get('victim_exit')} within {k.get('killed_within_ms')} ms"),
    ("kill: exempt command spared", "yes" if k.get("exempt_alive") == "1" else "NO", ""),
    ("kill: root's nvidia-smi spared", "yes" if k.get("root_nvidia_smi_alive") == "1" else "NO", ""),
    ("shim'd tenant at quota reported", "no" if q.get("reported") == "0" else "YES",
     f"allocated {q.get('allocated_mib')} MiB, NVML {q.get('nvml_used_mib')} MiB, quota 2048 MiB"),
    ("leaving member's memory held back", "yes" if d.get("lingered", "0") != "0" or
     d.get("drained", "0") != "0" else "no",
     f"newcomer got {d.get('first_fill_mib')} MiB at once, {d.get('full_fill_mib')} MiB "
     f"by {d.get('full_at_ms')} ms (lingered {d.get('lingered')}, drained {d.get('drained')}, "
     f"bound hit {d.get('bound_hit')})"),
]
print(f"\naudit on GPU 0 (memory.used before {base} MiB, overhead allowance {overhead} MiB)")
for name, v, d in rows:
    print(f"  {name:32} {v:5} {d}")
PY
unset KAIROS_SHIM_CONF
