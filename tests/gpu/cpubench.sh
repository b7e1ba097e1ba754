# cpubench.sh - the cpubench section of scripts/gpu-suite (sourced; uses $OUT and the
# carried build tree .carry/build of scripts/gpu-carry): the shim's CPU costs on this
# host's cores, which other sessions do not load as they do the build machine's:
# fork() of a process that opened the (fake) GPU, native vs in a tenant vs with
# kairosd stopped (scripts/bench-fork), and an allocation with its free, native vs
# from credit vs asking kairosd, 1 and 8 threads (scripts/bench-alloc). The fake
# driver stands in for the GPU, so these are the shim's and kairosd's own costs.
echo "--- cpubench: fork and allocation cost with the fake driver ($(nproc) cores)"
cdir=$OUT/cpubench
mkdir -p "$cdir"
cbuild=$PWD/.carry/build
uptime | tee "$cdir/uptime-before.txt"
python3 scripts/bench-fork "$cbuild" "${CPUBENCH_FORKS:-500}" "${CPUBENCH_REPEAT:-3}" \
  > "$cdir/bench-fork.txt" 2>&1
echo "cpubench: bench-fork exit $?"
python3 scripts/bench-alloc "$cbuild" "${CPUBENCH_ROUNDS:-2000}" "${CPUBENCH_REPEAT:-3}" \
  > "$cdir/bench-alloc.txt" 2>&1
echo "cpubench: bench-alloc exit $?"
uptime | tee "$cdir/uptime-after.txt"
tail -n 12 "$cdir/bench-fork.txt"
tail -n 16 "$cdir/bench-alloc.txt"
