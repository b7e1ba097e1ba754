# profile.sh - the profile section of scripts/gpu-suite (sourced; uses $kairos, $python,
# $OUT). Records the planner's per-profile throughput tables of four workloads with
# kairos profile: ResNet-50 inference at batch 8 and 64, a transformer training step
# and a memory-bound kernel, on whatever the GPU allows (MIG instances the admin
# configured, else the MPS active-thread proxy; no MIG setting is changed), for the
# planner's model of this GPU ($profile_model: H200-141GB or H100-80GB, from its name;
# another GPU is skipped with a line). Writes $OUT/profile/<workload>.yaml (committed
# under data/planner/profiles/h200/ or h100/) and prints each table normalised to the
# whole GPU. The two inference workloads also
# get --time-shares 25,50,75 (issue 28 item 2): three more runs each on the whole GPU
# as tenants of a private kairosd (kairosd_env.sh) with their GPU time capped there,
# the tables' time_shares, printed as the fraction of whole kept at each share (a
# launch-bound workload keeps more than the share). About 4-5 minutes (6 runs of ~7 s
# per workload with PROFILE_SECONDS=3, 3 more per inference workload); PROFILE_ONLY="NAME
# ..." profiles only those workloads (e.g. "resnet50-inf-bs8 resnet50-inf-bs64").
. tests/gpu/kairosd_env.sh
echo "--- profile: per-profile throughput tables (kairos profile)"
case "$gpu" in
  *H200*) profile_model=H200-141GB ;;
  *H100*80GB*) profile_model=H100-80GB ;;
  *) profile_model= ;;
esac
if [ -z "$profile_model" ]; then
  echo "profile: no planner model for $gpu (H200 and H100 80GB have one): skipped"
  return 0
fi
mkdir -p "$OUT/profile"
pkd=/tmp/kairos-profile-kd
rm -rf "$pkd" && mkdir -p "$pkd"
kairosd_private "$pkd" "$OUT/profile/kairosd.log" <<< "  []"  # tenants: kairos run's
shares=()
if [ -S "$pkd/kairosd.sock" ]; then
  shares=(--time-shares 25,50,75)
else
  echo "profile: kairosd did not start ($OUT/profile/kairosd.log): no time shares measured"
fi
profile_one() { # name, kairos profile options..., --, workload args...
  local name=$1 opts=()
  shift
  case " ${PROFILE_ONLY:-$name} " in *" $name "*) ;; *) return 0 ;; esac
  while [ "$1" != "--" ]; do opts+=("$1"); shift; done
  shift
  "$kairos" profile --model "$profile_model" --name "$name" --timeout 90 "${opts[@]}" \
    --out "$OUT/profile/$name.yaml" \
    -- $python tests/gpu/profile_workload.py "$@" --seconds "${PROFILE_SECONDS:-3}" \
    || echo "profile $name: FAILED"
}
profile_one resnet50-inf-bs8 "${shares[@]}" -- resnet50-inf --batch 8
profile_one resnet50-inf-bs64 "${shares[@]}" -- resnet50-inf --batch 64
profile_one transformer-train-bs8 -- transformer-train --batch 8
profile_one membound-add -- membound
[ -n "$kd_pid" ] && { kill "$kd_pid"; wait "$kd_pid" 2>/dev/null; }
unset KAIROS_SOCKET KAIROS_SHIM_CONF
for f in "$OUT"/profile/*.yaml; do
  [ -f "$f" ] || continue
  echo "== $(basename "$f" .yaml)"
  awk '/^method|^memory_mib/ {print}
       /^throughput:/ {t = 1; next}
       t && /^  / {k = $1; sub(":", "", k); v[k] = $2; o[++n] = k; next}
       /^time_shares:/ {s = 1; t = 0; next}
       /^[a-z]/ {t = 0; s = 0}
       s && /^  / {k = $1; sub(":", "", k); sv[k] = $2; so[++m] = k; next}
       END {for (i = 1; i <= n; i++) printf "  %-10s %10.3f  %.3f of whole\n", o[i], v[o[i]], v[o[i]] / v["whole"]
            for (i = 1; i <= m; i++) printf "  t=%-7s %10.3f  %.3f of whole (linear: %.2f)\n", so[i] "%", sv[so[i]], sv[so[i]] / v["whole"], so[i] / 100}' "$f"
done
