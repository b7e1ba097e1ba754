# harm.sh - the harm section of scripts/gpu-suite (sourced; uses $bin, $python, $OUT and
# $stream, the kernel_stream the suite found or built; kairos run finds the shim through
# the exported KAIROS_SHIM). Runs the "do no harm" benchmark (tests/gpu/harm_bench.py):
# Kairos against native time-slicing and MPS at its best on PyTorch work, each mix in
# every configuration (native; mps: a private control daemon, quit after; kairos:
# kairosd's default time_mode), 3 interleaved repetitions, medians. The quick subset:
# infer4 (4 closed-loop ResNet-50 batch-1 eager inference processes, 25 % each),
# latency-train (the latency section's requests next to training; latency priority
# under Kairos, client priorities under MPS), limit-long (~200 ms kernels under a 30 %
# limit). Writes $OUT/harm-results.json, $OUT/harm.tsv (mix, metric, native, mps,
# kairos) and $OUT/harm-runs.tar.gz; prints its table last (kairos/native and a verdict
# against the goals). 377 s on the H200 (2026-12-04; 493 s with infer8
# added); docs/scheduler.md, "The harm benchmark".
# Knobs: HARM_MIXES (infer4,latency-train,limit-long, the group quick; also
# latency-train-open, infer2, infer8, infer4-tf, infer4-open, infer8-open, train-pair,
# deep2, deep4, deep8, deep4-uneq, lend, train-infer-uneq; space-infer2, space-infer4, space-infer8,
# space-latency-train, space-pair, the group space: kairosd's space mode, judged
# against MPS; space-pair-sms, the pair with SMs capped at its shares),
# HARM_CONFIGS (native,mps,kairos; kairos-windows, kairos-timeslices, kairos-auto add
# kairosd in that time_mode, kairos-memory one with memory quotas only, shim-alone the
# shim preloaded with KAIROS_MEM and no kairosd), HARM_REPS
# (3), HARM_SECONDS (6, a closed-loop round), HARM_REQUESTS (800, latency-train's
# requests a round), HARM_LONG_SECONDS (8, a limit-long run), HARM_LONG_WORK
# (kernel_stream --work), HARM_TRAIN_SECONDS (8, a train-pair or lend round),
# HARM_OPEN_GAP_MS (16, the open loop's mean gap per process). HARM_DRY_RUN=1: tenants
# without torch or a GPU (tests/system/test_harm_bench.py runs this file so).
# Afterwards, where the files came back (DIR holds harm-results.json):
#   python3 tests/gpu/harm_bench.py --save DIR
# copies them into bench/results/DATE-harm/ with a README.md holding the table.
echo "--- harm: Kairos against native time-slicing and MPS on PyTorch work"
$python tests/gpu/harm_bench.py --bin "$bin" --out "$OUT" --python "$python" \
  --stream "${stream:-$bin/kernel_stream}" ${HARM_DRY_RUN:+--dry-run}
harm_rc=$?
# an MPS control daemon the benchmark could not quit itself (it was killed), and those
# kairosd ran for a space mix's fault domain (kairosd leaves them to their clients): quit
for harm_pipe in "$OUT"/harm/*/mps/pipe "$OUT"/harm/*/kd-*/mps/*/pipe; do
  [ -e "$harm_pipe/control" ] &&
    echo quit | CUDA_MPS_PIPE_DIRECTORY=$harm_pipe nvidia-cuda-mps-control
done
[ "$harm_rc" = 0 ]
