# memory.sh - the memory section of scripts/gpu-suite (sourced; uses $bin, $kairos,
# $KAIROS_SHIM, $python, $OUT, $stream, value()). Starts its own kairosd on a
# private socket with three tenants, runs the checks of the memory issue, prints
# one result line per check and a table, and writes $OUT/memory-results.json.
kairosd=$bin/kairosd
probe=$bin/mem_probe
if [ ! -x "$probe" ] && command -v nvcc >/dev/null; then
  nvcc -arch=sm_90 -O2 -o /tmp/mem_probe tests/gpu/mem_probe.cu && probe=/tmp/mem_probe
fi
mdir=/tmp/kairos-memory
rm -rf "$mdir" && mkdir -p "$mdir"
cat > "$mdir/kairosd.yaml" <<YAML
socket: $mdir/kairosd.sock
state: $mdir/state.json
admins: [0]
audit: { interval_ms: 1000, kill: false }
tenants:
  - name: victim
    memory: { 0: 16G }
  - name: attacker
    memory: { 0: 8G }
  - name: probe
    memory: { 0: 4G }
YAML
"$kairosd" -c "$mdir/kairosd.yaml" > "$OUT/kairosd.log" 2>&1 &
kd_pid=$!
export KAIROS_SOCKET=$mdir/kairosd.sock  # kairos's own connection
# the shims find this daemon through a shim.conf (libkairos(7)), never KAIROS_SOCKET
printf 'socket: %s\non_daemon_down: closed\n' "$KAIROS_SOCKET" > "$mdir/shim.conf"
chmod 0644 "$mdir/shim.conf"
export KAIROS_SHIM_CONF=$mdir/shim.conf
for _ in $(seq 50); do [ -S "$KAIROS_SOCKET" ] && break; sleep 0.1; done
held_of() { "$kairos" ps --json | $python -c "import json,sys; d=json.load(sys.stdin); print(sum(g['held'] for t in d['tenants'] if t['name']=='$1' for g in t['gpus']))"; }
: > "$mdir/results.txt"
result() { echo "RESULT $*" | tee -a "$mdir/results.txt"; }

echo "--- m1. a CUDA program fills its quota: standalone 4 GiB, then tenant 'probe' (4 GiB)"
KAIROS_MEM=4G LD_PRELOAD=$KAIROS_SHIM "$probe" fill | tee "$mdir/fill-standalone.txt"
"$kairos" run --tenant probe -- "$probe" fill | tee "$mdir/fill-tenant.txt"
for f in standalone tenant; do
  result "fill_$f view_total_mib=$(value view_total_mib < "$mdir/fill-$f.txt") total_global_mem_mib=$(value total_global_mem_mib < "$mdir/fill-$f.txt") allocated_mib=$(value allocated_mib < "$mdir/fill-$f.txt") free_at_refusal_kib=$(value free_at_refusal_kib < "$mdir/fill-$f.txt") works_after_refusal=$(value works_after_refusal < "$mdir/fill-$f.txt")"
done

echo "--- m2. PyTorch under a 6 GiB quota"
KAIROS_MEM=6G LD_PRELOAD=$KAIROS_SHIM $python tests/gpu/torch_oom.py oom | tee "$mdir/torch-oom.txt"
result "torch_oom view_total_mib=$(value view_total_mib < "$mdir/torch-oom.txt") device_total_mib=$(value device_total_mib < "$mdir/torch-oom.txt") oom_after_mib=$(value oom_after_mib < "$mdir/torch-oom.txt") works_after_oom=$(value works_after_oom < "$mdir/torch-oom.txt")"

echo "--- m3. nvidia-smi inside tenant 'probe', and the controls it uses"
"$kairos" run --tenant probe -- nvidia-smi --query-gpu=memory.total,memory.used --format=csv | tee "$mdir/smi.txt"
result "nvidia_smi_in_tenant total=$(tail -1 "$mdir/smi.txt" | sed 's/ //g; s/,/_used=/')"
"$kairos" trace -- nvidia-smi --query-gpu=memory.total,memory.used --format=csv 2>&1 | \
  grep -o 'cmd=[A-Za-z0-9_]*(0x[0-9a-f]*)' | sort | uniq -c

echo "--- m4. the KRYPTON attack: victim at its quota, 48 attacker processes"
"$kairos" run --tenant victim -- $python tests/gpu/torch_oom.py victim 25 14500 > "$mdir/victim.txt" 2>&1 &
victim=$!
sleep 6
for i in $(seq 48); do
  "$kairos" run --tenant attacker -- "$probe" attack > "$mdir/attacker-$i.txt" 2>&1 &
done
sleep 2
attacker_peak=$(held_of attacker)
wait $(jobs -p | grep -v "^$kd_pid$" | grep -v "^$victim$") 2>/dev/null
wait "$victim"
cat "$mdir/victim.txt"
ctx_ok=$(cat "$mdir"/attacker-*.txt | grep -c "context=ok")
ctx_refused=$(cat "$mdir"/attacker-*.txt | grep -c "context=refused")
alloc_ok=$(cat "$mdir"/attacker-*.txt | grep -c "alloc_1g=ok")
result "attack victim_failed_allocations=$(value failed_allocations < "$mdir/victim.txt") victim_iterations=$(value iterations < "$mdir/victim.txt") attacker_contexts_ok=$ctx_ok attacker_contexts_refused=$ctx_refused attacker_1g_ok=$alloc_ok attacker_held_mib=$((attacker_peak / 1048576)) attacker_quota_mib=8192"

echo "--- m5. SIGKILL of a tenant process: its memory leaves the ledger"
"$kairos" run --tenant probe -- $python -c "import torch,time; x=torch.empty(2<<30,dtype=torch.uint8,device='cuda'); print('ready',flush=True); time.sleep(60)" > "$mdir/kill.txt" 2>&1 &
kp=$!
for _ in $(seq 300); do grep -q ready "$mdir/kill.txt" && break; sleep 0.1; done
before=$(held_of probe)
t0=$(date +%s%N)
kill -9 "$kp"
while [ "$(held_of probe)" != 0 ]; do
  [ $(( ($(date +%s%N) - t0) / 1000000 )) -gt 5000 ] && break
  sleep 0.005
done
result "sigkill held_before_mib=$((before / 1048576)) released_after_ms=$(( ($(date +%s%N) - t0) / 1000000 )) held_after=$(held_of probe)"
wait "$kp" 2>/dev/null

echo "--- m6. allocation latency and throughput: native vs standalone vs tenant"
: > "$mdir/overhead.tsv"
for round in 1 2 3; do
  for mode in native standalone tenant; do
    case $mode in
      native) run=() ;;
      standalone) run=(env KAIROS_MEM=100G LD_PRELOAD=$KAIROS_SHIM) ;;
      tenant) run=("$kairos" run --tenant victim --) ;;
    esac
    lat=$("${run[@]}" "$probe" latency 300)
    thr=$("${run[@]}" "$stream" --seconds 2 --alloc-mib 256 | value launches_per_s)
    printf '%s\t%s\t%s\t%s\t%s\n' "$round" "$mode" "$(echo "$lat" | value alloc_p50_us)" \
      "$(echo "$lat" | value alloc_p99_us)" "$thr" | tee -a "$mdir/overhead.tsv"
  done
done

kill "$kd_pid"; wait "$kd_pid" 2>/dev/null
unset KAIROS_SOCKET KAIROS_SHIM_CONF
grep "audit:" "$OUT/kairosd.log" | head -5
$python - "$mdir" "$OUT" "$gpu" "$driver" "$cuda" "$torchv" "$date" <<'PY'
import json, re, statistics, sys
mdir, out, gpu, driver, cuda, torchv, date = sys.argv[1:]
res = {"gpu": gpu, "driver": driver, "cuda": cuda, "torch": torchv, "date": date, "checks": {}}
for line in open(f"{mdir}/results.txt"):
    name, *fields = line.split()[1:]
    res["checks"][name] = {k: v for k, v in (f.split("=", 1) for f in fields)}
rows = [l.split("\t") for l in open(f"{mdir}/overhead.tsv").read().splitlines()]
med = lambda mode, col: statistics.median(float(r[col]) for r in rows if r[1] == mode and r[col])
res["overhead"] = {m: {"alloc_p50_us": med(m, 2), "alloc_p99_us": med(m, 3),
                       "launches_per_s": med(m, 4)} for m in ("native", "standalone", "tenant")}
json.dump(res, open(f"{out}/memory-results.json", "w"), indent=1)
print(f"\n{gpu}, driver {driver}, CUDA {cuda}, torch {torchv}, {date}")
for name, c in res["checks"].items():
    print(f"  {name:18} " + " ".join(f"{k}={v}" for k, v in c.items()))
o = res["overhead"]
print(f"{'':22}{'native':>10}{'standalone':>12}{'tenant':>10}{'tenant/native':>15}")
for key, label in (("alloc_p50_us", "cudaMalloc 64M p50 us"), ("alloc_p99_us", "cudaMalloc 64M p99 us"),
                   ("launches_per_s", "kernel launches/s")):
    v = [o[m][key] for m in ("native", "standalone", "tenant")]
    print(f"{label:22}{v[0]:10.1f}{v[1]:12.1f}{v[2]:10.1f}{v[2] / v[0]:15.3f}")
PY
