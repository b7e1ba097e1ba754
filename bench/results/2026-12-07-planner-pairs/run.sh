#!/bin/sh
# Writes bench-MODE.txt here: `kairos plan bench --no-exact --interference MODE` for the
# kernel-stream modes and the real-pair modes, each file headed by date, machine, commit.
# Usage (repository root, a built build-i): bench/results/2026-12-07-planner-pairs/run.sh
out=$(dirname "$0")
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
for m in kairos native kairos-pairs native-pairs; do
    { echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $cpu, $(nproc) cores, no GPU," \
           "commit $(git rev-parse --short HEAD), build-i (meson default buildtype)"
      echo "# build-i/src/cli/kairos plan bench --no-exact --interference $m"
      /usr/bin/time -f "# %e s wall" build-i/src/cli/kairos plan bench --no-exact \
          --interference "$m" 2>&1; } > "$out/bench-$m.txt"
done
