#!/usr/bin/env python3
"""`kairos plan` from the command line: bad option values are usage errors (exit 2),
a --from plan that does not fit the cluster is refused with what is wrong (never an
"internal error"), --add reads a file with 'workloads' only, and --remove spends one
move budget for the whole command; by default no MIG instance holds two workloads,
--mig-time-sharing lets them share one again and is refused together with --emit;
`kairos plan trace` replays a trace under its three policies (usage errors exit 2, a bad
trace names its line, the totals of every policy come back under --json).
Usage: test_cli.py KAIROS_BINARY"""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

KAIROS = sys.argv[1]

CLUSTER = """gpus:
  - model: A100-40GB
    count: 8
workloads:
"""


def whole_only(name, share):
    return (f"  - name: {name}\n    memory_mib: 1000\n    target: {100 * share}\n"
            f"    throughput:\n      whole: 100\n")


class PlanCli(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.cluster = self.write("cluster.yaml", CLUSTER + "".join(
            whole_only(f"x{i}", 0.3) for i in range(9)))

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, text):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def run_plan(self, *args):
        return subprocess.run([KAIROS, "plan", *args], capture_output=True, text=True, timeout=60)

    def plan_json(self, *args):
        r = self.run_plan("--json", "--algo", "temporal", *args, self.cluster)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return self.write("plan.json", r.stdout)

    def test_bad_numbers_are_usage_errors(self):
        for args in (["--exact-limit", "abc"], ["--exact-limit", "-1"], ["--exact-limit", "1x"],
                     ["--max-moves", "abc"], ["--max-moves", "-2"], ["--pools", "both"]):
            r = self.run_plan(*args, self.cluster)
            self.assertEqual(r.returncode, 2, f"{args}: {r.stderr}")
            self.assertIn(args[1], r.stderr)

    def test_bad_from_plans_are_refused_clearly(self):
        with open(self.plan_json()) as f:
            good = json.load(f)
        cases = []
        bad = json.loads(json.dumps(good))
        bad["gpus"][0]["instances"][0]["workloads"][0]["t"] = 0.01   # misses its target
        cases.append((bad, "misses its target"))
        bad = json.loads(json.dumps(good))
        bad["gpus"][0]["instances"][0]["start"] = 99
        cases.append((bad, "outside"))
        bad = json.loads(json.dumps(good))
        bad["gpus"][0]["instances"][0]["workloads"][0]["t"] = 1e300
        cases.append((bad, "time share"))
        bad = json.loads(json.dumps(good))
        bad["gpus"][1]["instances"][0]["workloads"].append(
            bad["gpus"][0]["instances"][0]["workloads"][0])             # placed twice
        cases.append((bad, "does not fit the cluster file"))
        bad = json.loads(json.dumps(good))
        bad["gpus"][0]["model"] = "H100-80GB"
        cases.append((bad, "GPU pool"))
        bad = json.loads(json.dumps(good))
        bad["gpus"] = bad["gpus"] * 4                                  # 12 GPUs > 8
        cases.append((bad, "more than its 8 GPUs"))
        for plan, why in cases:
            path = self.write("bad.json", json.dumps(plan))
            r = self.run_plan("--from", path, "--remove", "x1", self.cluster)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn(why, r.stderr)
            self.assertNotIn("internal error", r.stderr)

    def test_add_with_workloads_only(self):
        plan = self.plan_json()
        extra = self.write("extra.yaml", "workloads:\n" + whole_only("new", 0.05))
        r = self.run_plan("--json", "--from", plan, "--add", extra, self.cluster)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        out = json.loads(r.stdout)
        names = [w["name"] for g in out["gpus"] for i in g["instances"] for w in i["workloads"]]
        self.assertIn("new", names)
        dup = self.write("dup.yaml", "workloads:\n" + whole_only("x3", 0.05))
        r = self.run_plan("--from", plan, "--add", dup, self.cluster)
        self.assertEqual(r.returncode, 1)
        self.assertIn("already in the cluster", r.stderr)

    def test_remove_spends_one_budget(self):
        plan = self.plan_json()          # 3 GPUs of 3 x 30 %
        r = self.run_plan("--json", "--from", plan, "--remove", "x0,x3", "--max-moves", "1",
                          self.cluster)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        moves = json.loads(r.stdout)["moves"]
        relocated = [m for m in moves if m["from_gpu"] is not None and m["to_gpu"] is not None]
        self.assertLessEqual(len(relocated), 1)
        r = self.run_plan("--from", plan, "--remove", "x0,nope", self.cluster)
        self.assertEqual(r.returncode, 1)
        self.assertIn("'nope' is not in the cluster file", r.stderr)

    def test_mig_time_sharing_opt_out(self):
        # eight small workloads that one 1g.5gb could time-share (3 / 20 = 15 % each)
        cluster = self.write("mig.yaml", CLUSTER.replace("count: 8", "count: 2") + "".join(
            f"  - name: m{i}\n    memory_mib: 1000\n    target: 3\n    throughput:\n"
            f"      whole: 100\n      1g.5gb: 20\n" for i in range(8)))

        def most_per_mig_instance(*args):
            r = self.run_plan("--json", *args, cluster)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            gpus = json.loads(r.stdout)["gpus"]
            return max([len(i["workloads"]) for g in gpus if g["mig"]
                        for i in g["instances"]] + [0])
        for algo in ("kairos", "seed", "gpulet", "exact"):
            self.assertLessEqual(most_per_mig_instance("--algo", algo), 1, algo)
        self.assertGreater(most_per_mig_instance("--algo", "seed", "--mig-time-sharing"), 1)
        out = os.path.join(self.dir.name, "emit-refused")
        r = self.run_plan("--mig-time-sharing", "--emit", out, cluster)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("kairosd cannot enforce time shares inside a MIG instance", r.stderr)
        self.assertFalse(os.path.exists(out))
        r = self.run_plan("--help")
        self.assertIn("--mig-time-sharing", r.stdout)

    def test_explain_and_emit(self):
        out = os.path.join(self.dir.name, "emit")
        r = self.run_plan("--explain", "--emit", out, "--gpus-per-node", "2", self.cluster)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        bound = re.search(r"at least (\d+) GPUs; this plan: (\d+)", r.stdout)
        self.assertIsNotNone(bound, r.stdout)
        self.assertEqual(bound.group(1), "3")        # 9 x 30 % cannot fit fewer GPUs
        self.assertLessEqual(int(bound.group(1)), int(bound.group(2)))
        self.assertIn("idle capacity per GPU", r.stdout)
        self.assertIn("x4: GPU", r.stdout)
        for name in ("mig-parted.yaml", "gres.conf", "kairosd-node0.yaml", "kairosd-node1.yaml"):
            self.assertTrue(os.path.exists(os.path.join(out, name)), name)
        r = self.run_plan("--gpus-per-node", "0", self.cluster)
        self.assertEqual(r.returncode, 2)
        # an online change is emitted too: x4 removed, its tenant gone from its node
        plan = self.plan_json()
        out2 = os.path.join(self.dir.name, "emit2")
        r = self.run_plan("--from", plan, "--remove", "x4", "--emit", out2, self.cluster)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        tenants = ""
        for name in sorted(os.listdir(out2)):
            if name.startswith("kairosd-node"):
                with open(os.path.join(out2, name)) as f:
                    tenants += f.read()
        self.assertIn("name: x3", tenants)
        self.assertNotIn("name: x4", tenants)
        r = self.run_plan("--from", plan, "--remove", "x4", "--explain", self.cluster)
        self.assertEqual(r.returncode, 2)

    def test_trace(self):
        trace = self.write("trace.yaml", "end: 100\nevents:\n  - at: 10\n    arrive:\n"
                           "      {name: late, memory_mib: 1000, target: 30, "
                           "throughput: {whole: 100}}\n"
                           "  - {at: 20, depart: x0}\n  - {at: 30, depart: late}\n")
        r = self.run_plan("trace", "--json", self.cluster, trace)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(out["policy"], "drain-aware")
        self.assertEqual([e["event"] for e in out["events"]],
                         ["start", "arrive", "depart", "depart"])
        self.assertEqual(out["events"][1]["workload"], "late")
        for p in ("online", "replan", "drain-aware"):
            self.assertGreater(out["totals"][p]["gpu_hours"], 0, p)
            self.assertEqual(out["totals"][p]["unplaced"], 0, p)
        r = self.run_plan("trace", "--policy", "online", self.cluster, trace)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("events under online", r.stdout)
        self.assertIn("+late", r.stdout)
        for args in (["--policy", "sometimes"], ["--drain", "0"], ["--horizon", "x"],
                     ["--max-moves", "-1"]):
            r = self.run_plan("trace", *args, self.cluster, trace)
            self.assertEqual(r.returncode, 2, f"{args}: {r.stderr}")
            self.assertIn(args[0], r.stderr)
        r = self.run_plan("trace", self.cluster)
        self.assertEqual(r.returncode, 2)
        self.assertIn("expected CLUSTER.yaml and TRACE.yaml", r.stderr)
        bad = self.write("bad.yaml", "events:\n  - {at: 5, depart: nobody}\n")
        r = self.run_plan("trace", "--json", self.cluster, bad)
        self.assertEqual(r.returncode, 1)
        self.assertIn("'nobody' departs at 5 s but no workload", json.loads(r.stdout)["error"])
        r = self.run_plan("trace", "--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("--horizon", r.stdout)

    def test_interference_pairs(self):
        # 9 x 30 % on whole GPUs: three to a GPU under native (eff(3) 0.9265), two under
        # native-pairs (0.896: 3 x 33.5 % does not fit), three under kairos-pairs (0.9288)
        def gpus(*args):
            r = self.run_plan("--json", "--algo", "temporal", *args)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            return json.loads(r.stdout)["summary"]["gpus"]
        self.assertEqual(gpus("--interference", "native", self.cluster), 3)
        self.assertEqual(gpus("--interference", "native-pairs", self.cluster), 5)
        self.assertEqual(gpus("--interference", "kairos-pairs", self.cluster), 3)
        in_file = self.write("pairs.yaml", CLUSTER.replace("workloads:", "interference: "
                             "native-pairs\nworkloads:") + whole_only("a", 0.3))
        self.assertEqual(gpus(in_file), 1)
        out = os.path.join(self.dir.name, "emit-pairs")
        r = self.run_plan("--interference", "kairos-pairs", "--emit", out, self.cluster)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(os.path.join(out, "kairosd-node0.yaml")) as f:
            self.assertIn("interference kairos-pairs", f.read())
        for args in (["--interference", "pairs", self.cluster],
                     ["bench", "--interference", "pairs"],
                     ["trace", "--interference", "pairs", self.cluster, self.cluster]):
            r = self.run_plan(*args)
            self.assertEqual(r.returncode, 2, f"{args}: {r.stdout} {r.stderr}")
            self.assertIn("kairos-pairs or native-pairs", r.stdout + r.stderr, args)

    def test_p99_refused_with_mig_time_sharing(self):
        cluster = self.write("p99.yaml", CLUSTER + "  - {name: serve, memory_mib: 100, target: 20, "
                             "throughput: {whole: 100}, p99_ms: 6, solo_p99_ms: {whole: 4}}\n")
        r = self.run_plan("--mig-time-sharing", cluster)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("workload 'serve' has a p99 target", r.stderr)
        self.assertIn("drop --mig-time-sharing", r.stderr)
        r = self.run_plan("--json", cluster)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_bench_traces(self):
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
        r = self.run_plan("bench", "--traces=" + os.path.join(root, "data", "planner", "traces"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        rows = re.findall(r"^small\s+(\S+)\s+37\s", r.stdout, re.M)
        self.assertEqual(rows, ["online", "replan", "drain-aware"], r.stdout)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
