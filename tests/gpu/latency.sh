# latency.sh - the latency section of scripts/gpu-suite (sourced; uses $bin, $python,
# $OUT; kairos run finds the shim through the exported KAIROS_SHIM). Runs the latency
# benchmark (tests/gpu/latency_bench.py): ResNet-50 inference requests (batch 8, one CUDA
# graph each, seeded exponential idle gaps) alone, then next to ResNet-50 training
# (batch 256) that keeps the GPU busy, natively, under MPS (a private control daemon,
# stopped after) and under kairosd in windows, timeslices and auto modes with the
# inference tenant at priority latency. Writes $OUT/latency-results.json and
# $OUT/latency-runs.tar.gz; prints its table last (p50, p99, p99/solo with a 95 %
# bootstrap interval, the training tenant's steps/s against solo).
# About 4 minutes on the H200 (estimated; at most ~5: each configuration's requests
# stop at LATENCY_MAX_S=30 s). Shorter: LATENCY_REQUESTS (2000), LATENCY_GAP_MS (6, the mean
# idle gap), LATENCY_CONFIGS (native,mps,kairos-windows,kairos-timeslices,kairos-auto;
# solo-again, the inference tenant alone once more at the end, and kairos-MODE-yUS,
# kairosd in MODE with latency_yield_us: US, only when named);
# also LATENCY_BATCH (8), LATENCY_TRAIN_BATCH (256), LATENCY_SEED (1). LATENCY_DRY_RUN=1:
# tenants without torch or a GPU (tests/system/test_latency_bench.py runs this file so).
echo "--- latency: inference next to saturating training"
$python tests/gpu/latency_bench.py --bin "$bin" --out "$OUT" --python "$python" \
  ${LATENCY_DRY_RUN:+--dry-run}
