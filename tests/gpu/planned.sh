# planned.sh - the planned section of scripts/gpu-suite (sourced; uses $kairos, $bin,
# $python, $gpu, $driver, $OUT). Does a plan that `kairos plan --emit` wrote, applied to
# kairosd unchanged, give each workload its target on this GPU? (issue 28;
# tests/gpu/planned_bench.py says how.) The workloads' tables: the profile section's of
# this run ($OUT/profile, run `profile planned` together), else the committed ones of
# this GPU's model (data/planner/profiles/h200/ or h100/). Writes $OUT/planned.tsv,
# $OUT/planned-results.json and $OUT/planned-runs.tar.xz; prints its table last. About
# 6 minutes (PLANNED_REPS, default 3; PLANNED_SETTLE, default 5, seconds the workloads run
# together before PLANNED_SECONDS, default 5, measured ones).
echo "--- planned: emitted plans applied to kairosd, each workload against its target"
case "$gpu" in
  *H200*) planned_tables=data/planner/profiles/h200 ;;
  *H100*80GB*) planned_tables=data/planner/profiles/h100 ;;
  *) planned_tables= ;;
esac
[ -f "$OUT/profile/resnet50-inf-bs8.yaml" ] && planned_tables=$OUT/profile
if [ -z "$planned_tables" ] || [ ! -f "$planned_tables/resnet50-inf-bs8.yaml" ]; then
  echo "planned: no profile tables for $gpu (run the profile section first): skipped"
else
  echo "planned: tables from $planned_tables"
  $python tests/gpu/planned_bench.py --kairos "$kairos" --kairosd "$bin/kairosd" \
    --profiles "$planned_tables" --out "$OUT" --python "$python" --gpu "$gpu" \
    --driver "$driver" --reps "${PLANNED_REPS:-3}" --seconds "${PLANNED_SECONDS:-5}" \
    --settle "${PLANNED_SETTLE:-5}" \
    || echo "planned: FAILED (see the failures above)"
fi
