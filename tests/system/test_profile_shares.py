#!/usr/bin/env python3
"""kairos profile --time-shares against kairosd with the fake GPU backend, no GPU: the
MPS part through the fake nvidia-smi and MPS daemon (tests/unit/planner/fake), then one
run per share as a tenant of kairosd with its GPU time capped there (the fake workload
reads its cap back from kairos ps --json and answers 1000 x sqrt(cap)); the table gets
time_shares, the ephemeral tenants are gone after, and kairos plan gives the workload
the smaller share the curve allows. Refused: no kairosd (nothing run), shares outside
(0, 100), MIG, a workload that prints no throughput.
Usage: test_profile_shares.py KAIROSD_BINARY KAIROS_BINARY"""
import math
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kairos_proto as kp  # noqa: E402
from harness import wait_for  # noqa: E402

KAIROSD, KAIROS = sys.argv[1], sys.argv[2]
FAKE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "unit", "planner", "fake")
WORKLOAD = os.path.join(FAKE, "share_workload.py")
FAKE_GPUS = "gpu 0 GPU-fake-0000 85899345920\n"


def read_shares(path):
    shares, inside = {}, False
    with open(path) as f:
        for line in f:
            if line.startswith("time_shares:"):
                inside = True
            elif inside and line.startswith("  "):
                key, _, value = line.strip().partition(":")
                shares[float(key)] = float(value)
            elif not line.startswith("#"):
                inside = False
    return shares


class TimeShares(unittest.TestCase):
    def setUp(self):
        self.d = kp.Daemon(KAIROSD, "", gpus=1, fake=FAKE_GPUS)
        self.d.start()
        self.log = os.path.join(self.d.dir, "log")
        shim = os.path.join(self.d.dir, "libkairos.so")
        open(shim, "wb").close()
        self.env = dict(os.environ, PATH=FAKE + ":" + os.environ["PATH"], FAKE_LOG=self.log,
                        TMPDIR=self.d.dir, KAIROS_SOCKET=self.d.socket, KAIROS_SHIM=shim,
                        LD_PRELOAD="", FAKE_KAIROS=KAIROS, **self.d.shim_env())

    def tearDown(self):
        self.d.stop_after(self)

    def profile(self, *args, env=None):
        return subprocess.run([KAIROS, "profile", *args, "--", WORKLOAD], capture_output=True,
                              text=True, timeout=60, env=env or self.env)

    def runs(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return [l.split() for l in f if l.startswith("run ")]

    def test_table_and_plan(self):
        out = os.path.join(self.d.dir, "t.yaml")
        r = self.profile("--name", "inf", "--out", out, "--time-shares", "50,25%,75")
        self.assertEqual(r.returncode, 0, r.stderr)
        shares = read_shares(out)
        self.assertEqual(sorted(shares), [25, 50, 75])
        for pct, thr in shares.items():
            self.assertAlmostEqual(thr, 1000 * math.sqrt(pct / 100), places=2)
        tenant_runs = [l for l in self.runs() if l[1] != "-"]
        self.assertEqual(sorted(float(l[3]) for l in tenant_runs), [0.25, 0.5, 0.75])
        self.assertTrue(all(l[2] == "-" for l in tenant_runs))   # no MPS under kairosd
        self.assertIn("its GPU time capped at 25%", r.stderr)
        # ephemeral tenants: gone with their command
        self.assertTrue(wait_for(lambda: not [n for n in self.d.ps() if n.startswith("run-")]),
                        self.d.ps())
        # the planner: target 500 of 1000 is 25 % on the curve, not 50 %
        cluster = os.path.join(self.d.dir, "cluster.yaml")
        with open(cluster, "w") as f:
            f.write("gpus: [{model: H200-141GB, count: 1}]\nworkloads:\n"
                    "  - {name: inf, profile: t.yaml, target: 500}\n")
        r = subprocess.run([KAIROS, "plan", cluster, "--json"], capture_output=True, text=True,
                           timeout=30, env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        t = [float(x) for x in re.findall(r'"t": ([0-9.]+)', r.stdout)]
        self.assertEqual(t, [0.25], r.stdout)
        self.assertIn('"normalized_throughput": 1', r.stdout)

    def test_refused_without_kairosd(self):
        env = dict(self.env, KAIROS_SOCKET="", **self.d.shim_env(socket="/nonexistent/k.sock"))
        r = self.profile("--time-shares", "50", env=env)
        self.assertEqual(r.returncode, 1)
        self.assertIn("kairosd is not running", r.stderr)
        self.assertIn("start it", r.stderr)
        self.assertIn("nothing was run", r.stderr)
        self.assertEqual(self.runs(), [])

    def test_shares_outside_0_100_refused(self):
        for bad in ("0", "100", "50,120", "-5", "abc", "25,25", "50;75"):
            r = self.profile("--time-shares", bad)
            self.assertEqual(r.returncode, 2, bad)
            self.assertIn("--time-shares", r.stderr)
        self.assertEqual(self.runs(), [])

    def test_mig_refused(self):
        mig = os.path.join(self.d.dir, "mig.txt")
        with open(mig, "w") as f:
            f.write("GPU 0: NVIDIA H200 (UUID: GPU-x)\n"
                    "  MIG 1g.18gb     Device  0: (UUID: MIG-a)\n")
        r = self.profile("--time-shares", "50", env=dict(self.env, FAKE_MIG_LIST=mig))
        self.assertEqual(r.returncode, 1)
        self.assertIn("MIG hides", r.stderr)

    def test_no_throughput(self):
        out = os.path.join(self.d.dir, "t.yaml")
        r = self.profile("--out", out, "--time-shares", "50",
                         env=dict(self.env, FAKE_FAIL_SHARES="1"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("without a line throughput=<number>", r.stderr)
        self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
