# compute.sh - the compute section of scripts/gpu-suite (sourced; uses $bin, $kairos,
# $python, $OUT, $stream, value()). A first look at time shares on the real GPU:
# kernel_stream tenants alone, together natively, and together under kairosd with
# shares (75/25, deep queues: timeslices) and with a 30 % limit next to an idle
# neighbour (windows). Prints launches/s and the share of solo each got.
kairosd=$bin/kairosd
cdir=/tmp/kairos-compute
rm -rf "$cdir" && mkdir -p "$cdir"
cat > "$cdir/kairosd.yaml" <<YAML
socket: $cdir/kairosd.sock
state: $cdir/state.json
admins: [0]
audit: { interval_ms: 0 }
tenants:
  - name: a
    memory: { 0: 8G }
    compute: { 0: { share: 75% } }
  - name: b
    memory: { 0: 8G }
    compute: { 0: { share: 25% } }
  - name: capped
    memory: { 0: 8G }
    compute: { 0: { limit: 30% } }
YAML
deep=(--seconds 8 --alloc-mib 64 --batch 256)
echo "--- c1. solo (deep queue)"
solo=$("$stream" "${deep[@]}" | value launches_per_s)
echo "solo launches/s $solo"
echo "--- c2. two processes natively"
"$stream" "${deep[@]}" > "$cdir/n1.txt" &
p1=$!
"$stream" "${deep[@]}" > "$cdir/n2.txt"
wait "$p1" # by pid: a bare wait also waits for the suite's tee
n1=$(value launches_per_s < "$cdir/n1.txt"); n2=$(value launches_per_s < "$cdir/n2.txt")
"$kairosd" --check -c "$cdir/kairosd.yaml" && "$kairosd" -c "$cdir/kairosd.yaml" -l debug > "$OUT/kairosd-compute.log" 2>&1 &
cd_pid=$!
export KAIROS_SOCKET=$cdir/kairosd.sock
for _ in $(seq 50); do [ -S "$KAIROS_SOCKET" ] && break; sleep 0.1; done
echo "--- c3. tenants a (share 75 %) and b (share 25 %)"
timeout 60 "$kairos" run --tenant a -- "$stream" "${deep[@]}" > "$cdir/a.txt" &
pa=$!
timeout 60 "$kairos" run --tenant b -- "$stream" "${deep[@]}" > "$cdir/b.txt" &
pb=$!
wait "$pa" "$pb"
ka=$(value launches_per_s < "$cdir/a.txt"); kb=$(value launches_per_s < "$cdir/b.txt")
echo "--- c4. tenant 'capped' (limit 30 %) alone, shallow queue"
timeout 60 "$kairos" run --tenant capped -- "$stream" --seconds 8 --alloc-mib 64 > "$cdir/c.txt"
kc=$(value launches_per_s < "$cdir/c.txt")
solo_shallow=$("$stream" --seconds 4 --alloc-mib 64 | value launches_per_s)
kill "$cd_pid"; wait "$cd_pid" 2>/dev/null
unset KAIROS_SOCKET
grep -c "TIME_POLICY\|policy" "$OUT/kairosd-compute.log" | sed 's/^/kairosd policy log lines: /'
$python - "$solo" "$n1" "$n2" "$ka" "$kb" "$kc" "$solo_shallow" "$OUT" <<'PY'
import json, sys
solo, n1, n2, ka, kb, kc, solo_sh = (float(x or "nan") for x in sys.argv[1:8])
out = sys.argv[8]
res = {"solo_deep": solo, "native": [n1 / solo, n2 / solo], "kairos_75_25": [ka / solo, kb / solo],
       "capped_30": kc / solo_sh}
json.dump(res, open(f"{out}/compute-results.json", "w"), indent=1)
print(f"\nshares of solo (deep queue, solo {solo:.0f} launches/s):")
print(f"  native two processes   {n1 / solo:6.3f} {n2 / solo:6.3f}   aggregate {(n1 + n2) / solo:6.3f}")
print(f"  kairos shares 75/25    {ka / solo:6.3f} {kb / solo:6.3f}   aggregate {(ka + kb) / solo:6.3f}")
print(f"  kairos limit 30 % alone (shallow, solo {solo_sh:.0f}/s): {kc / solo_sh:6.3f}")
PY
