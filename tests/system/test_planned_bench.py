#!/usr/bin/env python3
"""The planned section of the GPU suite (tests/gpu/planned_bench.py) without a GPU, so that
its first run on a GPU is not its first run: the plans `kairos plan` emits for the
committed H200 tables applied to a private kairosd as written, every round of every
repetition run with the configurations' order turning, each workload of the space plan
a client of its domain's MPS server (test_latency_bench.py's stand-in) with the SM cap
its emitted sms: says, the figures the medians of the rounds' own throughputs against
the targets; a `kairos` that lets its command escape the shim fails the plan's rounds,
and a plan that cannot be made is named while the rest still runs.
Usage: test_planned_bench.py KAIROSD KAIROS SHIM GPU_TESTS_DIR"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import unittest

import test_latency_bench as tlb  # the same arguments; its stand-in kairos and environment

KAIROSD, KAIROS, GPU_DIR = tlb.KAIROSD, tlb.KAIROS, tlb.GPU_DIR
sys.path.insert(0, GPU_DIR)
import planned_bench as pb  # noqa: E402

BENCH = os.path.join(GPU_DIR, "planned_bench.py")
TABLES = os.path.normpath(os.path.join(GPU_DIR, "..", "..", "data", "planner", "profiles",
                                       "h200"))


def run_bench(out, tables=TABLES, kairos=KAIROS, reps=2):
    return subprocess.run([sys.executable, BENCH, "--kairos", kairos, "--kairosd", KAIROSD,
                           "--profiles", tables, "--out", out, "--dry-run", "--reps",
                           str(reps), "--seconds", "0.3", "--settle", "0.1",
                           "--ready-timeout", "60"],
                          capture_output=True, text=True, env=tlb.bench_env(), timeout=240)


class Parsing(unittest.TestCase):
    EMITTED = ("# a comment\ntenants:\n  - name: a\n    memory: { 0: 942MiB }\n"
               "    fault_domain: gpu0\n    sms: 13%   # the SMs of MIG 1g.18gb\n"
               "  - name: b\n    memory: { 0: 1G }\n    sms: 25%\n")

    def test_the_tenants_list_and_each_sm_cap(self):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            f.write(self.EMITTED)
            f.flush()
            text = pb.emitted_tenants(f.name)
        self.assertTrue(text.startswith("  - name: a\n"))
        self.assertNotIn("tenants:", text)
        self.assertEqual(pb.emitted_sms(text), {"a": "13", "b": "25"})

    def test_the_cluster_names_the_tables_model_and_targets(self):
        text = pb.cluster_yaml(TABLES)
        self.assertIn("  - model: H200-141GB\n    count: 1\n", text)
        for name, table, _, target in pb.WORKLOADS:
            self.assertIn(f"  - name: {name}\n    profile: {TABLES}/{table}.yaml\n"
                          f"    target_fraction: {target}\n", text)


class DryRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.out = tempfile.mkdtemp(prefix="planned-")
        cls.r = run_bench(cls.out)
        with open(os.path.join(cls.out, "planned-results.json")) as f:
            cls.doc = json.load(f)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.out, ignore_errors=True)

    def test_every_round_ran_and_the_order_turned(self):
        self.assertEqual(self.r.returncode, 0, self.r.stdout + self.r.stderr)
        self.assertEqual(self.doc["failures"], [])
        names = [w[0] for w in pb.WORKLOADS]
        for rep in (1, 2):
            rounds = [r for r in self.doc["rounds"] if r["rep"] == rep]
            self.assertEqual([r["names"] for r in rounds if r["config"] == "solo"],
                             [[n] for n in names])
            together = [r["config"] for r in rounds if r["config"] != "solo"]
            self.assertEqual(sorted(together), ["native", "space", "time"])
            if rep == 1:
                first = together
        self.assertNotEqual(together, first)  # the second repetition's order turned

    def test_the_emitted_shares_reached_kairosd(self):
        time_plan = self.doc["plans"]["time"]
        for name, _, _, _ in pb.WORKLOADS:
            self.assertRegex(time_plan, rf"- name: {name}\n.*\n    compute: {{ 0: {{ share: ")
        logs = [f for f in os.listdir(os.path.join(self.out, "planned"))
                if f.startswith("kairosd-") and f.endswith("-time.log")]
        self.assertEqual(len(logs), 2)  # one kairosd per time round
        yaml = [os.path.join(self.out, "planned", d, "kairosd.yaml")
                for d in os.listdir(os.path.join(self.out, "planned"))
                if d.startswith("kd-") and d.endswith("-time")]
        with open(yaml[0]) as f:
            self.assertIn(time_plan.rstrip("\n"), f.read())

    def test_each_space_workload_is_a_client_with_its_emitted_cap(self):
        sms = pb.emitted_sms(self.doc["plans"]["space"])
        self.assertEqual(sorted(sms), sorted(w[0] for w in pb.WORKLOADS))
        spaces = [r for r in self.doc["rounds"] if r["config"] == "space"]
        self.assertEqual(len(spaces), 2)
        for r in spaces:
            for name, seen in r["placement"].items():
                self.assertTrue(seen["shim"], name)
                self.assertTrue(seen["mps_client"], name)
                self.assertEqual(seen["space"]["domain"], "gpu0")
                self.assertEqual(seen["space"]["percentage"], sms[name])

    def test_the_figures_are_the_rounds_own_against_the_targets(self):
        rounds = self.doc["rounds"]
        for name, _, _, target in pb.WORKLOADS:
            solo = statistics.median(r["figures"][name] for r in rounds
                                     if r["config"] == "solo" and r["names"] == [name])
            for config in ("native", "time", "space"):
                want = statistics.median(r["figures"][name] / (target * solo) for r in rounds
                                         if r["config"] == config)
                got = self.doc["results"][config][name]
                self.assertAlmostEqual(got["median"], want, places=9)
                self.assertEqual(len(got["ratios"]), 2)
        with open(os.path.join(self.out, "planned.tsv")) as f:
            rows = [line.rstrip("\n").split("\t") for line in f]
        self.assertEqual(rows[0], ["config", "workload", "target", "median_of_target",
                                   "rounds"])
        self.assertEqual(len(rows), 1 + 3 * len(pb.WORKLOADS))
        self.assertIn("met", self.r.stdout)


class Refusals(unittest.TestCase):
    def setUp(self):
        self.out = tempfile.mkdtemp(prefix="planned-")

    def tearDown(self):
        shutil.rmtree(self.out, ignore_errors=True)

    def test_a_kairos_that_escapes_the_shim_fails_the_plans_rounds(self):
        fake = os.path.join(self.out, "kairos")  # its plans are the real kairos's
        with open(fake, "w") as f:
            f.write(f'#!/bin/sh\n[ "$1" = plan ] && exec {KAIROS} "$@"\n'
                    + tlb.FAKE_KAIROS.split("\n", 1)[1])
        os.chmod(fake, 0o755)
        r = run_bench(os.path.join(self.out, "o"), kairos=fake, reps=1)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        with open(os.path.join(self.out, "o", "planned-results.json")) as f:
            doc = json.load(f)
        failed = {f["config"]: f["why"] for f in doc["failures"]}
        self.assertEqual(sorted(failed), ["space", "time"])
        self.assertRegex(failed["time"], "ran without the shim")
        self.assertIsNone(doc["results"]["time"]["train"]["median"])  # not counted
        self.assertIsNotNone(doc["results"]["native"]["train"]["median"])

    def test_a_plan_that_cannot_be_made_is_named_and_the_rest_runs(self):
        tables = os.path.join(self.out, "tables")
        shutil.copytree(TABLES, tables)
        path = os.path.join(tables, "transformer-train-bs8.yaml")
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:  # more memory than the GPU has: no plan places it
            f.write(text.replace("memory_mib: ", "memory_mib: 9999999 # was "))
        r = run_bench(os.path.join(self.out, "o"), tables=tables, reps=1)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        with open(os.path.join(self.out, "o", "planned-results.json")) as f:
            doc = json.load(f)
        self.assertEqual(sorted(f["config"] for f in doc["failures"]), ["space", "time"])
        self.assertRegex(doc["failures"][0]["why"], "kairos plan exited 1")
        self.assertEqual(sorted(r["config"] for r in doc["rounds"]),
                         ["native", "solo", "solo", "solo"])


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
