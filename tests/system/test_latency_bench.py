#!/usr/bin/env python3
"""The latency benchmark of the GPU suite (tests/gpu/latency_bench.py) without a GPU, so
that its first run on the H200 is not its first run: its statistics (the seeded request
schedule, percentiles, the bootstrap interval of a p99 ratio, rates from step stamps, the
stamp reader, the goal verdict) against known answers, and the whole benchmark in
--dry-run (tenants that sleep instead of using torch) with the real kairosd and `kairos
run` for the Kairos configurations and a stand-in nvidia-cuda-mps-control that records
how it is driven: every configuration measured with every request, MPS started on a
private pipe and stopped, the tenants of Kairos configurations admitted by that
configuration's kairosd in its time mode, a tenant that fails or runs outside the shim
reported as a failure (exit 1) and left out of the table.
Usage: test_latency_bench.py KAIROSD KAIROS SHIM GPU_TESTS_DIR"""
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest

KAIROSD, KAIROS, SHIM, GPU_DIR = (os.path.abspath(p) for p in sys.argv[1:5])
sys.path.insert(0, GPU_DIR)
import latency_bench as lb  # noqa: E402
from harness import wait_for  # noqa: E402
import latency_stats as stats  # noqa: E402

BENCH = os.path.join(GPU_DIR, "latency_bench.py")
ASAN_FIRST = os.environ.get("KAIROS_PRELOAD_FIRST", "")
REQUESTS = 300

FAKE_MPS = """#!/bin/sh
# a stand-in for nvidia-cuda-mps-control: logs each call with its pipe folder
log="$(dirname "$0")/mps-calls.log"
if [ "$1" = "-d" ]; then
  echo "start $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY" >> "$log"
  : > "$CUDA_MPS_PIPE_DIRECTORY/control"
  exit 0
fi
read -r cmd
echo "$cmd $CUDA_MPS_PIPE_DIRECTORY" >> "$log"
case "$cmd" in
  get_server_list) echo 4242 ;;
  quit) rm -f "$CUDA_MPS_PIPE_DIRECTORY/control" ;;
esac
"""

# a `kairos` that runs the command after -- without the shim: a Kairos configuration
# whose tenants escaped Kairos must not be reported as measured under it
FAKE_KAIROS = """#!/bin/sh
while [ "$1" != "--" ]; do shift; done
shift
unset LD_PRELOAD
exec "$@"
"""


def bench_env():
    e = {k: v for k, v in os.environ.items() if not k.startswith("KAIROS_")}
    e["KAIROS_SHIM"] = SHIM
    if ASAN_FIRST:
        e["LD_PRELOAD"] = ASAN_FIRST
        e["ASAN_OPTIONS"] = "detect_leaks=0:verify_asan_link_order=0"
    return e


def run_bench(out, *extra, path_dir=None, kairos=KAIROS):
    env = bench_env()
    if path_dir:
        env["PATH"] = path_dir + os.pathsep + env.get("PATH", "")
    return subprocess.run([sys.executable, BENCH, "--bin", os.path.dirname(KAIROS), "--kairos",
                           kairos, "--kairosd", KAIROSD, "--out", out, "--dry-run",
                           "--requests", str(REQUESTS), "--gap-ms", "1", "--lead-s", "0.3",
                           "--train-solo-s", "0.5", "--resamples", "200", *extra],
                          capture_output=True, text=True, env=env, timeout=240)


def source_section(scratch, section, env_extra):
    """Runs tests/gpu/SECTION.sh as scripts/gpu-suite sources it: $bin (kairos and kairosd
    linked into scratch/carry-bin), $python and env_extra ($OUT among them)."""
    bindir = os.path.join(scratch, "carry-bin")
    os.makedirs(bindir)
    os.symlink(KAIROS, os.path.join(bindir, "kairos"))
    os.symlink(KAIROSD, os.path.join(bindir, "kairosd"))
    env = dict(bench_env(), bin=bindir, python=sys.executable, **env_extra)
    return subprocess.run(["bash", "-c", f"set -uo pipefail; . tests/gpu/{section}.sh"],
                          cwd=os.path.dirname(os.path.dirname(GPU_DIR)),
                          capture_output=True, text=True, env=env, timeout=120)


def write_exec(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o755)


class MpsStop(unittest.TestCase):
    """The benchmarks' private MPS stops when its processes have exited, not when its pipe
    is gone (the real daemon leaves the pipe's socket behind): with the stand-in control
    daemon, whose server is its child, both are found by their pipe folder, and stop()
    returns once both have exited."""

    def test_stop_waits_for_the_daemon_and_its_server(self):
        work = tempfile.mkdtemp(prefix="mps-stop-")
        self.addCleanup(shutil.rmtree, work, ignore_errors=True)
        control = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "stand-ins",
                               "nvidia-cuda-mps-control")
        mps = lb.Mps(os.path.abspath(control), work)
        other = lb.Mps(os.path.abspath(control), os.path.join(work, "other"))
        self.assertTrue(mps.start() and other.start())
        self.addCleanup(other.stop)
        pipe = mps.env["CUDA_MPS_PIPE_DIRECTORY"]
        self.assertTrue(wait_for(lambda: len(lb.mps_processes(pipe)) == 2, timeout=10))
        daemon_and_server = lb.mps_processes(pipe)
        self.assertTrue(mps.stop())
        self.assertEqual(lb.mps_processes(pipe), [])
        for pid in daemon_and_server:
            self.assertFalse(os.path.exists(f"/proc/{pid}") and
                             open(f"/proc/{pid}/stat").read().rsplit(") ", 1)[1][0] not in "ZX")
        self.assertEqual(len(lb.mps_processes(other.env["CUDA_MPS_PIPE_DIRECTORY"])), 2)


class Statistics(unittest.TestCase):
    def test_percentile_interpolates_between_ranks(self):
        v = list(range(1, 101))
        random.Random(3).shuffle(v)
        self.assertAlmostEqual(stats.percentile(v, 0.99), 99.01)
        self.assertAlmostEqual(stats.percentile(v, 0.5), 50.5)
        self.assertEqual(stats.percentile([4.0], 0.99), 4.0)
        self.assertTrue(math.isnan(stats.percentile([], 0.5)))

    def test_percentile_is_numpys_where_numpy_is(self):
        if stats.numpy is None:
            self.skipTest("no numpy on this machine")
        v = [random.Random(5).expovariate(1.0) for _ in range(777)]
        for q in (0.5, 0.9, 0.99, 0.999):
            self.assertAlmostEqual(stats.percentile(v, q), float(stats.numpy.quantile(v, q)))

    def test_request_gaps_are_seeded_exponential(self):
        a = stats.request_gaps(20000, 8.0, 1)
        self.assertEqual(a, stats.request_gaps(20000, 8.0, 1))  # every configuration's
        self.assertNotEqual(a, stats.request_gaps(20000, 8.0, 2))
        self.assertTrue(all(g > 0 for g in a))
        self.assertAlmostEqual(sum(a) / len(a), 8.0, delta=0.25)
        tail = sum(g > 24.0 for g in a) / len(a)  # P(X > 3 mean) = e^-3 = 0.0498
        self.assertAlmostEqual(tail, math.exp(-3), delta=0.008)
        self.assertEqual(stats.request_gaps(5, 0, 1), [0.0] * 5)

    def check_interval(self, n, resamples):
        rng = random.Random(11)
        solo = [1.0 + rng.expovariate(4.0) for _ in range(n)]
        same = [1.0 + rng.expovariate(4.0) for _ in range(n)]
        slow = [1.5 * (1.0 + rng.expovariate(4.0)) for _ in range(n)]
        lo, hi = stats.bootstrap_ratio_ci(solo, same, 0.99, resamples, 7)
        self.assertLessEqual(lo, 1.0)
        self.assertGreaterEqual(hi, 1.0)
        lo, hi = stats.bootstrap_ratio_ci(solo, slow, 0.99, resamples, 7)
        self.assertLess(lo, 1.5)
        self.assertGreater(hi, 1.5)
        self.assertGreater(lo, 1.1)  # a 1.5x slowdown is told apart from the goal
        self.assertLess(hi - lo, 0.8)
        return hi - lo

    def test_bootstrap_interval_holds_the_true_ratio(self):
        saved = stats.numpy
        try:
            stats.numpy = None  # the pure-Python path
            self.check_interval(600, 200)
        finally:
            stats.numpy = saved
        if saved is not None:
            self.check_interval(2000, 2000)

    def test_bootstrap_interval_narrows_with_more_requests(self):
        saved = stats.numpy
        try:
            stats.numpy = None
            rng = random.Random(13)
            widths = []
            for n in (200, 2000):
                solo = [rng.expovariate(1.0) for _ in range(n)]
                other = [1.2 * rng.expovariate(1.0) for _ in range(n)]
                lo, hi = stats.bootstrap_ratio_ci(solo, other, 0.99, 150, 7)
                widths.append(hi - lo)
            self.assertLess(widths[1], widths[0] * 0.7)
        finally:
            stats.numpy = saved
        self.assertTrue(all(math.isnan(x) for x in stats.bootstrap_ratio_ci([1.0], [1.0, 2.0])))

    def test_rate_counts_whole_steps_inside_the_window(self):
        ends = [i * 10_000_000 for i in range(200)]  # a step every 10 ms
        self.assertAlmostEqual(stats.rate_between(ends, 205_000_000, 1_505_000_000), 100.0)
        self.assertTrue(math.isnan(stats.rate_between(ends, 1, 2)))
        self.assertTrue(math.isnan(stats.rate_between([], 0, 10**9)))

    def test_stamps_reader_drops_a_torn_line(self):
        with tempfile.NamedTemporaryFile("w", delete=False) as f:
            f.write("100 5\n200 7\n\n30x 9\n300")
        try:
            self.assertEqual(stats.read_stamps(f.name), [(100, 5), (200, 7), (300,)])
        finally:
            os.unlink(f.name)
        self.assertEqual(stats.read_stamps("/nonexistent/stamps"), [])

    def test_pauses_and_sensor_time_read_from_the_shims_exit_report(self):
        log = ("step 1\nkairos[41]: time control: pauses=17 pause_mean_us=650.2 "
               "pause_max_us=900.0 resumes=17 resume_mean_us=400.1 resume_max_us=800.0\n")
        self.assertEqual(stats.shim_pauses(log), 17)
        self.assertEqual(stats.shim_pauses("role=infer units=300\n"), 0)
        two = ("kairos[7]: time sensor: samples=900 sample_mean_us=1.50 sample_ms=1.4\n"
               "kairos[8]: time sensor: samples=10 sample_mean_us=20.00 sample_ms=0.2\n")
        self.assertAlmostEqual(stats.shim_sensor_ms(two), 1.6)
        self.assertEqual(stats.shim_sensor_ms("role=infer units=300\n"), 0)

    def test_goal_verdict_uses_the_interval(self):
        self.assertEqual(stats.goal_verdict(1.02, (0.97, 1.08), 1.1), "met")
        self.assertEqual(stats.goal_verdict(1.08, (0.99, 1.2), 1.1), "unclear")
        self.assertEqual(stats.goal_verdict(1.4, (1.2, 1.6), 1.1), "missed")
        self.assertEqual(stats.goal_verdict(float("nan"), (1, 2), 1.1), "n/a")


class DryRun(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="latency-bench-")
        self.out = os.path.join(self.dir, "out")
        self.fakebin = os.path.join(self.dir, "bin")
        os.makedirs(self.fakebin)
        write_exec(os.path.join(self.fakebin, "nvidia-cuda-mps-control"), FAKE_MPS)

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def results(self):
        with open(os.path.join(self.out, "latency-results.json")) as f:
            return json.load(f)

    def archived(self, name):
        with tarfile.open(os.path.join(self.out, "latency-runs.tar.gz")) as t:
            return t.extractfile(f"latency/{name}").read().decode()

    def test_every_configuration_measured_and_mps_stopped(self):
        r = run_bench(self.out, path_dir=self.fakebin)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        res = self.results()
        self.assertEqual(res["failures"], [])
        self.assertEqual(res["solo"]["requests"], REQUESTS)
        self.assertGreater(res["solo"]["train_steps_per_s"], 50)  # 5 ms steps
        labels = ["native", "mps", "kairos-windows", "kairos-timeslices", "kairos-auto"]
        self.assertEqual(list(res["configs"]), labels)
        for label in labels:
            x = res["configs"][label]
            self.assertEqual(x["requests"], REQUESTS, label)
            self.assertGreaterEqual(x["p99_ms"], x["p50_ms"])
            self.assertAlmostEqual(x["p99_vs_solo"], x["p99_ms"] / res["solo"]["p99_ms"])
            lo, hi = x["p99_vs_solo_ci95"]
            self.assertLessEqual(lo, hi)
            self.assertGreater(x["train_vs_solo"], 0.5, label)  # sleeps do not compete
            self.assertIn(x["goal"], ("met", "unclear", "missed"))
            # nothing runs on a GPU here, so the shims never paused a tenant
            if label.startswith("kairos-"):
                self.assertEqual(x["pauses"], {"infer": 0, "train": 0})
        # the table comes last, one line per configuration
        tail = r.stdout.strip().splitlines()
        at = next(i for i, ln in enumerate(tail) if ln.startswith("=== latency"))
        rows = [ln.split()[0] for ln in tail[at + 3:]]
        self.assertEqual(rows[:6], ["solo"] + labels)
        self.assertEqual(tail[-1], "failures (left out above): 0")
        # MPS: started on a private pipe under OUT, asked for its servers, quit
        with open(os.path.join(self.fakebin, "mps-calls.log")) as f:
            calls = [ln.split() for ln in f.read().splitlines()]
        self.assertEqual([c[0] for c in calls], ["start", "get_server_list", "quit"])
        pipe = calls[0][1]
        self.assertTrue(pipe.startswith(self.out), pipe)
        self.assertTrue(all(c[1] == pipe for c in calls))
        self.assertEqual(res["mps_servers"], "4242")
        self.assertIn("mps=1", self.archived("mps/infer.ready"))
        self.assertIn("mps=0", self.archived("native/infer.ready"))
        # Kairos: each configuration's own kairosd, in its time mode, admitted both
        # tenants, which ran under the shim (and the native ones did not)
        for mode in ("windows", "timeslices", "auto"):
            label = f"kairos-{mode}"
            log = self.archived(f"kairosd-{label}.log")
            self.assertIn(f"time_mode: {mode}", self.archived(f"kd-{label}/kairosd.yaml"))
            for tenant in ("infer", "train"):
                pid = re.search(r"pid=(\d+)", self.archived(f"{label}/{tenant}.ready")).group(1)
                self.assertRegex(log, rf"tenant {tenant}: pid {pid} .*admitted")
                self.assertIn("shim=1", self.archived(f"{label}/{tenant}.ready"))
        self.assertIn("shim=0", self.archived("native/train.ready"))
        # what comes back from the GPU machine: two files, the run folders archived
        self.assertEqual(sorted(os.listdir(self.out)),
                         ["latency-results.json", "latency-runs.tar.gz"])

    def test_a_failing_tenant_is_reported_and_left_out(self):
        r = run_bench(self.out, "--configs", "native,kairos-timeslices",
                      "--dry-fail", "kairos-timeslices")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        res = self.results()
        self.assertEqual(res["failures"], ["kairos-timeslices/infer: exited 1"])
        self.assertEqual(list(res["configs"]), ["native"])
        self.assertEqual(res["configs"]["native"]["requests"], REQUESTS)
        self.assertIn("failures (left out above): 1", r.stdout)
        self.assertNotRegex(r.stdout, r"\nkairos-timeslices +\d")

    def test_tenants_outside_the_shim_are_not_counted_as_kairos(self):
        fake = os.path.join(self.fakebin, "kairos")
        write_exec(fake, FAKE_KAIROS)
        r = run_bench(self.out, "--configs", "kairos-windows", kairos=fake)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        res = self.results()
        self.assertEqual(res["configs"], {})
        self.assertEqual(sorted(res["failures"]), [
            "kairos-windows/infer: shim=0 but the configuration is under Kairos",
            "kairos-windows/train: shim=0 but the configuration is under Kairos"])

    def test_requests_unlike_solos_are_not_compared(self):
        """A CUDA graph captured alone but not under Kairos (LATENCY_GRAPHS=0 as a
        failed capture would leave it): eager requests are not compared with graphs."""
        fake = os.path.join(self.fakebin, "kairos")
        write_exec(fake, f"#!/bin/sh\nexport LATENCY_GRAPHS=0\nexec {KAIROS} \"$@\"\n")
        r = run_bench(self.out, "--configs", "native,kairos-auto", kairos=fake)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        res = self.results()
        self.assertEqual(list(res["configs"]), ["native"])
        self.assertEqual(res["failures"], ["kairos-auto/infer: graphs=0 where solo had 1 (CUDA "
                                           "graph capture failed in one of them)"])

    def test_solo_again_runs_the_inference_tenant_alone(self):
        r = run_bench(self.out, "--configs", "native,solo-again")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        x = self.results()["configs"]["solo-again"]
        self.assertEqual(x["requests"], REQUESTS)
        self.assertTrue(math.isnan(x["train_steps_per_s"]))
        with tarfile.open(os.path.join(self.out, "latency-runs.tar.gz")) as t:
            names = t.getnames()
        self.assertIn("latency/solo-again/infer.stamps", names)
        self.assertNotIn("latency/solo-again/train.ready", names)  # no training started
        self.assertIn("latency/native/train.ready", names)
        self.assertRegex(r.stdout, r"\nsolo-again +300 .* - +- *\n")

    def test_mps_skipped_where_the_machine_has_none(self):
        r = run_bench(self.out, "--configs", "mps", "--mps-control",
                      os.path.join(self.dir, "no-such-mps-control"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("skipped", self.results()["configs"]["mps"])
        self.assertRegex(r.stdout, r"\nmps +skipped: no ")

    def test_the_gpu_suite_section_prints_the_table_last(self):
        """tests/gpu/latency.sh as scripts/gpu-suite sources it ($bin, $python, $OUT)."""
        r = source_section(self.dir, "latency", dict(
            LATENCY_DRY_RUN="1", LATENCY_REQUESTS="100", LATENCY_GAP_MS="1",
            LATENCY_CONFIGS="native,kairos-windows", OUT=self.out))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        lines = r.stdout.strip().splitlines()
        self.assertTrue(lines[0].startswith("--- latency"), lines[0])
        self.assertEqual([ln.split()[:2] for ln in lines[-4:-1]],
                         [["solo", "100"], ["native", "100"], ["kairos-windows", "100"]])
        self.assertEqual(lines[-1], "failures (left out above): 0")
        self.assertEqual(self.results()["configs"]["kairos-windows"]["requests"], 100)

    def test_yield_configuration_sets_the_training_slice(self):
        """kairos-MODE-yUS: kairosd in MODE with latency_yield_us US, which its
        scheduler gave the training tenant as its timeslice."""
        r = run_bench(self.out, "--configs", "kairos-auto-y150,kairos-windows-y0")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        res = self.results()
        self.assertEqual(list(res["configs"]), ["kairos-auto-y150", "kairos-windows-y0"])
        conf = self.archived("kd-kairos-auto-y150/kairosd.yaml")
        self.assertIn("time_mode: auto", conf)
        self.assertIn("latency_yield_us: 150", conf)
        self.assertRegex(self.archived("kairosd-kairos-auto-y150.log"),
                         r"tenant train, GPU 0: timeslice 150 us")
        # 0: the rule off, the batch tenant's slice of its share (at most 1 ms)
        self.assertRegex(self.archived("kairosd-kairos-windows-y0.log"),
                         r"tenant train, GPU 0: timeslice 1000 us")
        self.assertRegex(r.stdout, r"\nkairos-auto-y150 +300 ")

    def test_unknown_configuration_refused(self):
        r = run_bench(self.out, "--configs", "native,kairos-window")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown configuration(s) kairos-window; known: native,mps,", r.stderr)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
