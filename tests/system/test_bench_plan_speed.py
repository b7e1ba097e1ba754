#!/usr/bin/env python3
"""scripts/bench-plan-speed measures what it says: every round of every size is a run of
`kairos plan --json` on a scale file of that many workloads (each placed, as the plan's
summary says), its figures and the goal's verdict are the medians of those runs, and
--save writes them. Sizes here are small: the 100,000-workload figure is the script's to
print on an idle machine, not a timed test's.
Usage: test_bench_plan_speed.py KAIROS SOURCE_ROOT"""
import os
import subprocess
import sys
import tempfile
import unittest

KAIROS, ROOT = sys.argv[1:3]
SCRIPT = os.path.join(ROOT, "scripts", "bench-plan-speed")
BUILD = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(KAIROS))))


def bench(*args):
    return subprocess.run([sys.executable, SCRIPT, "--build", BUILD, *args],
                          capture_output=True, text=True, timeout=300)


class BenchPlanSpeed(unittest.TestCase):
    def test_every_round_of_every_size_is_measured_and_saved(self):
        with tempfile.TemporaryDirectory() as out:
            r = bench("--sizes", "300,1200", "--rounds", "3", "--save", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            lines = r.stdout.splitlines()
            self.assertIn("3 interleaved rounds of `kairos plan --json`", lines[0])
            self.assertRegex(lines[1], r"^ +300 workloads: wall median [\d.]+ s .* placed 300,")
            self.assertRegex(lines[2], r"^ +1200 workloads: .* placed 1200,")
            with open(os.path.join(out, "plan-speed.tsv")) as f:
                rows = [l.split("\t") for l in f.read().splitlines()]
            self.assertEqual(rows[0][:3], ["workloads", "round", "wall_s"])
            self.assertEqual([(r[0], r[1], r[6]) for r in rows[1:]],
                             [(n, str(i), n) for n in ("300", "1200") for i in (1, 2, 3)])
            walls = sorted(float(r[2]) for r in rows[1:4])
            self.assertIn(f"wall median {walls[1]:.2f} s (range {walls[0]:.2f}-{walls[2]:.2f})",
                          lines[1])
            with open(os.path.join(out, "summary.txt")) as f:
                self.assertEqual(f.read(), r.stdout)

    def test_the_goal_is_judged_on_its_size_only(self):
        r = bench("--sizes", "200", "--rounds", "1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("goal", r.stdout)  # 100,000 has the goal; 200 none

    def test_bad_arguments_are_refused_clearly(self):
        r = bench("--sizes", "many")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--sizes wants workload counts", r.stderr)
        r = bench("--rounds", "0")
        self.assertIn("at least 1", r.stderr)
        r = subprocess.run([sys.executable, SCRIPT, "--build", "/nonexistent"],
                           capture_output=True, text=True, timeout=60)
        self.assertIn("is not built", r.stderr)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
