# compute.sh - the compute section of scripts/gpu-suite (sourced; uses $bin, $python,
# $OUT). Runs the compute-isolation benchmark (tests/gpu/compute_bench.py): every
# kind of tenant alone, then each mix natively and under kairosd in the same run,
# a 30 % limit next to an idle neighbour, a lone tenant's overhead and inference
# latency next to training. Writes $OUT/compute-results.json and the per-run logs
# under $OUT/compute/; prints a table last.
$python tests/gpu/compute_bench.py --bin "$bin" --out "$OUT" \
  --seconds "${COMPUTE_SECONDS:-6}" ${COMPUTE_ONLY:+--only "$COMPUTE_ONLY"} \
  ${COMPUTE_MODES:+--modes "$COMPUTE_MODES"}
