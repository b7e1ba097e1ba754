# profile.sh - the profile section of scripts/gpu-suite (sourced; uses $kairos, $python,
# $OUT). Records the planner's per-profile throughput tables of four workloads with
# kairos profile: ResNet-50 inference at batch 8 and 64, a transformer training step
# and a memory-bound kernel, on whatever the GPU allows (MIG instances the admin
# configured, else the MPS active-thread proxy; no MIG setting is changed). Writes
# $OUT/profile/<workload>.yaml (the lead commits them under data/planner/profiles/h200/)
# and prints each table normalised to the whole GPU. About 3-4 minutes (6 runs of
# ~7 s per workload with PROFILE_SECONDS=3).
mkdir -p "$OUT/profile"
echo "--- profile: per-profile throughput tables (kairos profile)"
profile_one() { # name, workload args...
  local name=$1; shift
  "$kairos" profile --model H200-141GB --name "$name" --timeout 90 --out "$OUT/profile/$name.yaml" \
    -- $python tests/gpu/profile_workload.py "$@" --seconds "${PROFILE_SECONDS:-3}" \
    || echo "profile $name: FAILED"
}
profile_one resnet50-inf-bs8 resnet50-inf --batch 8
profile_one resnet50-inf-bs64 resnet50-inf --batch 64
profile_one transformer-train-bs8 transformer-train --batch 8
profile_one membound-add membound
for f in "$OUT"/profile/*.yaml; do
  [ -f "$f" ] || continue
  echo "== $(basename "$f" .yaml)"
  awk '/^method|^memory_mib/ {print}
       /^throughput:/ {t = 1; next}
       t && /^  / {sub(":", "", $1); v[$1] = $2; o[++n] = $1}
       END {for (i = 1; i <= n; i++) printf "  %-10s %10.3f  %.3f of whole\n", o[i], v[o[i]], v[o[i]] / v["whole"]}' "$f"
done
