# compute.sh - the compute section of scripts/gpu-suite (sourced; uses $bin, $python,
# $OUT). Runs the compute-isolation benchmark (tests/gpu/compute_bench.py): every
# kind of tenant alone, then each mix natively and under kairosd in the same run,
# a 30 % limit next to an idle neighbour, a lone tenant's overhead, lending
# (an idle PyTorch process next to a kernel stream; a tenant idle then busy),
# 170 ms kernels under a 30 % limit and bursty inference next to training. Writes
# $OUT/compute-results.json and the per-run logs under $OUT/compute-runs.tar.gz;
# prints a table last.
# COMPUTE_ONLY picks cases: mix names (75-25-deep, 70-30-deep-shallow, 40-30-20-10,
# 8-equal, 40-30-20-10-deep, 8-equal-deep, 70-30-matmul-train, 40-30-20-10-torch), limit, lone, lend, long (170 ms
# kernels under a 30 % limit, alone and next to a deep tenant, SM clock sampled),
# bursty (bursty inference at share 50 % next to training).
# Inference latency next to training moved to the latency section (tests/gpu/latency.sh).
# Issue 11's second run (about 3.7 minutes on the H200 at COMPUTE_SECONDS=4: 5.5 with
# the ~110 s of latency cases that moved; the harness alone, with stand-in tenants,
# took 176 s; ~35 s less without 75-25-deep):
#   COMPUTE_SECONDS=4 COMPUTE_ONLY=75-25-deep,40-30-20-10,8-equal,bursty,long \
#     scripts/gpu-suite compute
# (kernel_stream must know --burst-ms: scripts/gpu-carry rebuilds it.)
# Issue 11's comeback (a share back at once after an idle spell, the shared
# overrun's charge; bursty now prints the first window of each spell apart; about
# 2.5 minutes by the runs' lengths, not yet timed on a GPU):
#   COMPUTE_SECONDS=8 COMPUTE_ONLY=bursty,long scripts/gpu-suite compute
$python tests/gpu/compute_bench.py --bin "$bin" --out "$OUT" \
  --seconds "${COMPUTE_SECONDS:-6}" ${COMPUTE_ONLY:+--only "$COMPUTE_ONLY"} \
  ${COMPUTE_MODES:+--modes "$COMPUTE_MODES"}
