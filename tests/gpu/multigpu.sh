# multigpu.sh - the multigpu section of scripts/gpu-suite (sourced; uses $bin, $kairos,
# $KAIROS_SHIM, $python, $OUT, $stream, value()). Needs two GPUs (uses GPUs 0 and 1);
# on a machine with fewer it prints one line saying so and does nothing else.
#   g1. how the node names its GPUs: NVML index, PCI bus id, UUID, persistence mode
#       (without it the driver numbers GPUs in order of first use), /dev minor, and
#       which physical GPU CUDA's device 0 is under CUDA_VISIBLE_DEVICES=1 and =1,0;
#       the controls the shim's gpumap reads, traced before CUDA's device allocation
#   g2. per-GPU quotas (tenant split: 6 GiB on GPU 0, 3 GiB on GPU 1) with all GPUs
#       visible, with CUDA_VISIBLE_DEVICES=1 and =1,0: what PyTorch sees as each
#       device's size, what it can allocate, and on which GPU kairosd charged it;
#       nvidia-smi (NVML) inside the tenant
#   g3. a DDP/NCCL all-reduce job on both GPUs next to a kernel stream on each:
#       alone, natively time-sliced, and under kairosd at 50 % each (its windows
#       aligned across the GPUs; kairosd's debug log shows every window's phase)
# Writes $OUT/multigpu/ (logs) and $OUT/multigpu-results.json; prints a table last.
# MULTIGPU_SECONDS (default 20): how long each g3 run measures.
gdir=$OUT/multigpu
mkdir -p "$gdir"
. tests/gpu/kairosd_env.sh
ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "$ngpus" -lt 2 ]; then
  echo "multigpu: SKIPPED: this machine has $ngpus GPU(s); the section needs 2 (nvidia-h200-x2)"
  echo "skipped: $ngpus GPU(s)" > "$gdir/skipped.txt"
else
  gsec=${MULTIGPU_SECONDS:-20}
  : > "$gdir/results.txt"
  gresult() { echo "RESULT $*" | tee -a "$gdir/results.txt"; }

  echo "--- g1. how this node names its GPUs"
  nvidia-smi --query-gpu=index,pci.bus_id,uuid,persistence_mode --format=csv,noheader \
    | tee "$gdir/ids.txt"
  gresult "persistence_mode $(cut -d, -f1,4 "$gdir/ids.txt" | tr -d ' ' | tr '\n' ';')"
  nvidia-smi -q | grep -E "^GPU |Minor Number" | tee "$gdir/minors.txt"
  for vis in "" 1 "1,0"; do
    echo "CUDA_VISIBLE_DEVICES=${vis:-unset}:"
    if [ -n "$vis" ]; then
      CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=$vis $python tests/gpu/multigpu_probe.py view
    else
      $python tests/gpu/multigpu_probe.py view
    fi | tee "$gdir/view-native-${vis:-all}.txt"
  done

  echo "the controls gpumap reads, before CUDA's device allocation (CUDA_VISIBLE_DEVICES=1):"
  CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=1 "$kairos" trace -- \
    $python tests/gpu/multigpu_probe.py view 2>&1 \
    | grep -E "GET_PROBED_IDS|GET_ID_INFO|class=NV01_DEVICE_0|open .*path=/dev/nvidia[0-9]" \
    | head -20 | tee "$gdir/trace-visible-1.txt"
  gresult "trace_visible_1 $(grep -oE 'GET_PROBED_IDS|GET_ID_INFO_V2|NV01_DEVICE_0|/dev/nvidia[0-9]' \
    "$gdir/trace-visible-1.txt" | tr '\n' ',')"

  gmdir=/tmp/kairos-multigpu
  rm -rf "$gmdir" && mkdir -p "$gmdir"
  cat > "$gmdir/kairosd.yaml" <<YAML
socket: $gmdir/kairosd.sock
state: $gmdir/state.json
admins: [0]
gpus: 2                          # used only without NVML
tenants:
  - name: split
    memory: { 0: 6G, 1: 3G }
  - name: n0
    memory: { 0: 8G }
    compute: { 0: { share: 50% } }
  - name: ddp
    memory: { 0: 24G, 1: 24G }
    compute: { 0: { share: 50% }, 1: { share: 50% } }
  - name: n1
    memory: { 1: 8G }
    compute: { 1: { share: 50% } }
YAML
  # n0 is declared before ddp, n1 after: slot order alone would give ddp its window
  # second on GPU 0 and first on GPU 1; aligned, it is first on both
  export KAIROS_SOCKET=$gmdir/kairosd.sock  # kairos's own connection
  kairosd_shim_conf "$gmdir"
  kairosd_start "$gmdir" "$gdir/kairosd.log" -l debug
  held_gpus() { # tenant: held MiB per GPU, "G0,G1"
    "$kairos" ps --json | $python -c "import json,sys; d=json.load(sys.stdin); t=[t for t in d['tenants'] if t['name']=='$1'][0]; print(','.join(str(g['held']>>20) for g in t['gpus'][:2]))"
  }

  echo "--- g2. per-GPU quotas of tenant split (6 GiB on GPU 0, 3 GiB on GPU 1)"
  "$kairos" run --tenant split -- $python tests/gpu/multigpu_probe.py view | tee "$gdir/view-split-all.txt"
  for vis in 1 "1,0"; do
    CUDA_VISIBLE_DEVICES=$vis "$kairos" run --tenant split -- $python tests/gpu/multigpu_probe.py view \
      | tee "$gdir/view-split-$vis.txt"
  done
  for d in 0 1; do
    gresult "view_all device=$d $(grep "^device=$d " "$gdir/view-split-all.txt" | cut -d' ' -f2-)"
  done
  gresult "view_visible_1 $(grep '^device=0 ' "$gdir/view-split-1.txt")"
  gresult "view_visible_1,0 $(grep '^device=0 ' "$gdir/view-split-1,0.txt" | sed 's/^device=0/dev0=/; s/ /_/g') $(grep '^device=1 ' "$gdir/view-split-1,0.txt" | sed 's/^device=1/dev1=/; s/ /_/g')"
  # fill: which GPU is charged, for each visibility and CUDA device
  for case in "all 0" "all 1" "1 0" "1,0 0" "1,0 1"; do
    read -r vis dev <<< "$case"
    f=$gdir/fill-$vis-$dev.txt
    if [ "$vis" = all ]; then
      "$kairos" run --tenant split -- $python tests/gpu/multigpu_probe.py fill "$dev" 4 > "$f" 2>&1 &
    else
      CUDA_VISIBLE_DEVICES=$vis "$kairos" run --tenant split -- \
        $python tests/gpu/multigpu_probe.py fill "$dev" 4 > "$f" 2>&1 &
    fi
    fp=$!
    for _ in $(seq 600); do grep -q holding "$f" && break; kill -0 "$fp" 2>/dev/null || break; sleep 0.1; done
    held=$(held_gpus split)
    wait "$fp"
    gresult "fill visible=$vis cuda_device=$dev $(grep allocated_mib "$f") held_mib_gpu0,gpu1=$held"
    for _ in $(seq 50); do [ "$(held_gpus split)" = "0,0" ] && break; sleep 0.1; done
  done
  echo "nvidia-smi (NVML) inside tenant split, all visible, then CUDA_VISIBLE_DEVICES=1:"
  "$kairos" run --tenant split -- nvidia-smi --query-gpu=index,memory.total --format=csv,noheader \
    | tee "$gdir/smi-split-all.txt"
  CUDA_VISIBLE_DEVICES=1 "$kairos" run --tenant split -- \
    nvidia-smi --query-gpu=index,memory.total --format=csv,noheader | tee "$gdir/smi-split-1.txt"
  gresult "nvidia_smi_all $(tr -d ' ' < "$gdir/smi-split-all.txt" | tr '\n' ';')"
  gresult "nvidia_smi_visible_1 $(tr -d ' ' < "$gdir/smi-split-1.txt" | tr '\n' ';')"

  echo "--- g3. DDP (NCCL all-reduce) on GPUs 0+1 next to a kernel stream on each, ${gsec}s"
  g3_launch() { # mode tenant cmd...: cmd, as a process of tenant under kairos mode
    local mode=$1 tenant=$2
    shift 2
    if [ "$mode" = kairos ]; then "$kairos" run --tenant "$tenant" -- "$@"; else "$@"; fi
  }
  run_g3() { # mode: alone | streams | native | kairos
    local mode=$1 at pids=()
    at=$(( $(date +%s) + 30 ))
    if [ "$mode" != alone ]; then
      for g in 0 1; do
        CUDA_VISIBLE_DEVICES=$g g3_launch "$mode" "n$g" "$stream" --seconds "$gsec" \
          --alloc-mib 64 --batch 256 --start-at "$at" > "$gdir/g3-$mode-stream$g.txt" 2>&1 &
        pids+=($!)
      done
    fi
    if [ "$mode" != streams ]; then
      g3_launch "$mode" ddp $python tests/gpu/ddp_step.py --gpus 2 --seconds "$gsec" \
        --start-at "$at" > "$gdir/g3-$mode-ddp.txt" 2>&1 &
      pids+=($!)
    fi
    if [ "$mode" = kairos ]; then
      sleep $(( at - $(date +%s) + gsec / 2 ))
      "$kairos" ps > "$gdir/g3-kairos-ps.txt"
      "$kairos" top --once --wide > "$gdir/g3-kairos-top.txt"
    fi
    wait "${pids[@]}"
    local s0 s1 d
    s0=$(value launches_per_s < "$gdir/g3-$mode-stream0.txt" 2>/dev/null)
    s1=$(value launches_per_s < "$gdir/g3-$mode-stream1.txt" 2>/dev/null)
    d=$(grep -h 'steps=' "$gdir/g3-$mode-ddp.txt" 2>/dev/null | tail -1)
    gresult "g3_$mode $d stream0_launches_per_s=${s0:-none} stream1_launches_per_s=${s1:-none}"
  }
  for mode in alone streams native kairos; do run_g3 "$mode"; done
  cat "$gdir/g3-kairos-ps.txt" "$gdir/g3-kairos-top.txt"
  echo "ddp's windows as kairosd decided them (GPU, window us at phase us):"
  grep -E "tenant ddp, GPU [01]: timeslice" "$gdir/kairosd.log" | tail -4 | tee "$gdir/ddp-windows.txt"
  gresult "ddp_windows $(grep -E 'tenant ddp, GPU [01]: timeslice' "$gdir/kairosd.log" | tail -2 | sed 's/.*GPU \([01]\): .*window \([0-9/]*\) us at \([0-9]*\)/gpu\1=\2@\3/' | tr '\n' ' ')"

  kill "$kd_pid"; wait "$kd_pid" 2>/dev/null
  unset KAIROS_SOCKET KAIROS_SHIM_CONF
  $python - "$gdir" "$OUT" "$gpu" "$driver" "$cuda" "$torchv" "$date" <<'PY'
import json, re, sys
gdir, out, gpu, driver, cuda, torchv, date = sys.argv[1:]
res = {"gpu": gpu, "driver": driver, "cuda": cuda, "torch": torchv, "date": date, "checks": []}
for line in open(f"{gdir}/results.txt"):
    name, *fields = line.split()[1:]
    res["checks"].append({"check": name, **dict(f.split("=", 1) for f in fields if "=" in f)})
json.dump(res, open(f"{out}/multigpu-results.json", "w"), indent=1)
print(f"\nmultigpu: {gpu} x2, driver {driver}, CUDA {cuda}, torch {torchv}, {date}")
for c in res["checks"]:
    if not c["check"].startswith("g3_"):
        print("  " + " ".join(f"{k}={v}" for k, v in c.items()))
g3 = {c["check"][3:]: c for c in res["checks"] if c["check"].startswith("g3_")}
num = lambda c, k: float(c[k]) if c.get(k) not in (None, "none") else float("nan")
print(f"{'run':10}{'ddp step p50 ms':>17}{'p90 ms':>9}{'stream0 /s':>12}{'stream1 /s':>12}")
for mode in ("alone", "streams", "native", "kairos"):
    c = g3.get(mode, {})
    print(f"{mode:10}{num(c, 'step_ms_p50'):17.2f}{num(c, 'step_ms_p90'):9.2f}"
          f"{num(c, 'stream0_launches_per_s'):12.0f}{num(c, 'stream1_launches_per_s'):12.0f}")
PY
fi
