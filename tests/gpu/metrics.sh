# metrics.sh - the metrics section of scripts/gpu-suite (sourced; uses $bin, $kairos,
# $python, $OUT, $stream). Starts its own kairosd with the metrics endpoint on
# 127.0.0.1:$METRICS_PORT (default: a free port) and two tenants on GPU 0 (a: 8 GiB, 60 %;
# b: 1 GiB, 40 %); b fills its quota (a refusal), then both run a kernel stream
# for 10 s while the endpoint is scraped next to `kairos ps --json`; 20 more scrapes
# time what a scrape costs with NVML. Saves every scrape under $OUT/metrics/, writes
# $OUT/metrics-results.json and prints a table (tests/gpu/metrics_summary.py).
. tests/gpu/kairosd_env.sh
. tests/gpu/cuda_tool.sh
probe=$(cuda_tool mem_probe tests/gpu/mem_probe.cu)
echo "--- metrics: kairosd's Prometheus endpoint with NVML"
mport=${METRICS_PORT:-$($python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
mdir=/tmp/kairos-metrics
rm -rf "$mdir" && mkdir -p "$mdir" "$OUT/metrics"
cat > "$mdir/kairosd.yaml" <<YAML
socket: $mdir/kairosd.sock
state: $mdir/state.json
admins: [0]
metrics: 127.0.0.1:$mport
tenants:
  - name: a
    memory: { 0: 8G }
    compute: { 0: { share: 60% } }
  - name: b
    memory: { 0: 1G }
    compute: { 0: { share: 40% } }
YAML
export KAIROS_SOCKET=$mdir/kairosd.sock  # kairos's own connection
kairosd_shim_conf "$mdir"
kairosd_start "$mdir" "$OUT/metrics/kairosd.log"
# the ready line comes once the metrics endpoint listens, after the socket
for _ in $(seq 50); do grep -q "ready" "$OUT/metrics/kairosd.log" && break; sleep 0.1; done
if ! kill -0 "$kd_pid" 2>/dev/null; then
  echo "metrics: kairosd did not start:"; cat "$OUT/metrics/kairosd.log"
fi
msnap() {  # NAME: a scrape and kairos ps --json, side by side
  $python tests/gpu/metrics_summary.py scrape "$mport" > "$OUT/metrics/$1.prom"
  "$kairos" ps --json > "$OUT/metrics/$1.ps.json"
}
msnap idle
"$kairos" run --tenant b -- "$probe" fill > "$OUT/metrics/fill-b.txt" 2>&1
mstreams=()
for t in a b; do
  "$kairos" run --tenant $t -- "$stream" --seconds 10 \
    --alloc-mib 256 > "$OUT/metrics/stream-$t.txt" 2>&1 &
  mstreams+=($!)
done
sleep 4
msnap running-1
sleep 3
msnap running-2
$python tests/gpu/metrics_summary.py time "$mport" 20 > "$OUT/metrics/scrape-times.txt"
wait "${mstreams[@]}"
sleep 1
msnap after
kill "$kd_pid"; wait "$kd_pid" 2>/dev/null
$python tests/gpu/metrics_summary.py summary "$OUT/metrics" > "$OUT/metrics-results.json"
$python tests/gpu/metrics_summary.py table "$OUT/metrics-results.json"
unset KAIROS_SOCKET KAIROS_SHIM_CONF
