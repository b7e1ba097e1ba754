#!/usr/bin/env python3
"""`kairos profile` without a GPU: fake nvidia-smi and nvidia-cuda-mps-control on PATH
and a fake workload whose throughput depends on CUDA_MPS_ACTIVE_THREAD_PERCENTAGE. The
driver starts a private MPS daemon, runs one SM share per option, stops the daemon,
writes the table, and kairos plan reads it; on MIG devices it runs per instance.
Usage: test_profile.py KAIROS_BINARY"""
import math
import os
import subprocess
import sys
import tempfile
import unittest

KAIROS = sys.argv[1]
FAKE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake")
H200 = {"whole": 132, "1g.18gb": 16, "1g.35gb": 26, "2g.35gb": 32, "3g.71gb": 60,
        "4g.71gb": 64, "7g.141gb": 132}


def read_table(path):
    table, thr = {}, {}
    with open(path) as f:
        section = None
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            key, _, value = line.strip().partition(":")
            if line.startswith("  ") and section == "throughput":
                thr[key] = float(value)
            else:
                section = key
                table[key] = value.strip()
    table["throughput"] = thr
    return table


class Profile(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.log = os.path.join(self.dir.name, "log")
        self.env = dict(os.environ, PATH=FAKE + ":" + os.environ["PATH"], FAKE_LOG=self.log,
                        TMPDIR=self.dir.name)

    def tearDown(self):
        self.dir.cleanup()

    def profile(self, *args, env=None):
        return subprocess.run([KAIROS, "profile", *args, "--", os.path.join(FAKE, "workload.sh")],
                              capture_output=True, text=True, timeout=60, env=env or self.env)

    def log_lines(self):
        with open(self.log) as f:
            return [l.split() for l in f]

    def test_mps_proxy_table_and_plan(self):
        out = os.path.join(self.dir.name, "fake.yaml")
        r = self.profile("--name", "fake-app", "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        t = read_table(out)
        self.assertEqual(t["model"], "H200-141GB")
        self.assertEqual(t["method"], "mps")
        self.assertEqual(t["memory_mib"], "1234")
        for option, sms in H200.items():
            p = math.ceil(100 * sms / 132)
            self.assertAlmostEqual(t["throughput"][option], 1000 * (p / 100) ** 0.8, places=3)
        log = self.log_lines()
        starts = [l for l in log if l[0] == "start"]
        quits = [l for l in log if l[0] == "quit"]
        runs = [l for l in log if l[0] == "run"]
        self.assertEqual(len(starts), 1)
        self.assertEqual(len(quits), 1)                  # the daemon is stopped after
        pipe = starts[0][1]
        self.assertTrue(pipe.startswith(self.dir.name))  # private, not the system's
        self.assertEqual(quits[0][1], pipe)
        self.assertEqual(sorted(int(l[2]) for l in runs), [13, 20, 25, 46, 49, 100])
        self.assertTrue(all(l[1] == pipe for l in runs))
        self.assertFalse(os.path.exists(pipe))           # removed afterwards
        cluster = os.path.join(self.dir.name, "cluster.yaml")
        with open(cluster, "w") as f:
            f.write("gpus: [{model: H200-141GB, count: 4}]\nworkloads:\n"
                    "  - {name: app, profile: fake.yaml, target_fraction: 0.1, count: 3}\n")
        r = subprocess.run([KAIROS, "plan", "--json", cluster], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn('"placed": 3', r.stdout)

    def test_mig_devices_are_measured_without_mps(self):
        mig = os.path.join(self.dir.name, "mig.txt")
        with open(mig, "w") as f:
            f.write("GPU 0: NVIDIA H200 (UUID: GPU-fake)\n"
                    "  MIG 1g.18gb     Device  0: (UUID: MIG-a)\n"
                    "  MIG 3g.71gb     Device  1: (UUID: MIG-b)\n"
                    "  MIG 1g.18gb     Device  2: (UUID: MIG-c)\n")
        out = os.path.join(self.dir.name, "mig.yaml")
        r = self.profile("--out", out, env=dict(self.env, FAKE_MIG_LIST=mig))
        self.assertEqual(r.returncode, 0, r.stderr)
        t = read_table(out)
        self.assertEqual(t["method"], "mig")
        self.assertEqual(t["throughput"], {"1g.18gb": 150.0, "3g.71gb": 480.0})
        self.assertFalse([l for l in self.log_lines() if l[0] in ("start", "quit")])

    def test_missing_result_fails_and_stops_the_daemon(self):
        r = self.profile("--out", os.path.join(self.dir.name, "x.yaml"),
                         env=dict(self.env, FAKE_FAIL="1"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("throughput=<number>", r.stderr)
        self.assertEqual(len([l for l in self.log_lines() if l[0] == "quit"]), 1)

    def test_usage(self):
        for args in (["--timeout", "x"], ["--method", "green"], ["--model", "V100"]):
            r = self.profile(*args)
            self.assertEqual(r.returncode, 2, r.stderr)
        r = subprocess.run([KAIROS, "profile"], capture_output=True, text=True, timeout=10)
        self.assertEqual(r.returncode, 2)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
