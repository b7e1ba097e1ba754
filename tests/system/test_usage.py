#!/usr/bin/env python3
"""The chargeback counters end to end (docs/metrics.md, "Chargeback"): kairosd with
the fake GPU backend, two tenants under `kairos run` on the real libkairos.so and
the fake NVIDIA driver, one with a compute policy (charged by the scheduler) and
one without (charged its processes' measured utilization), both holding memory and
reported 50 % busy by the fake GPU. The scrape, parsed by prometheus_client's
parser, must show GPU time and held memory counting; across a stop and start, a
kill -9 and start, and a state file whose counters were damaged, no counter of a
tenant whose counters were kept may go backwards (nor "created" change), and they
go on counting; a tenant whose saved counters were damaged begins again from 0 with a
new "created", the others' kept.
Every wait is on a condition with a deadline.
Usage: test_usage.py KAIROSD KAIROS SHIM FAKEDRV FAKEAPP"""
import functools
import json
import os
import signal
import subprocess
import sys
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from debian_python import require  # noqa: E402

require("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402
from kairos_proto import Daemon  # noqa: E402
from harness import free_port, preload_env, reap, start_holding, wait_for  # noqa: E402

KAIROSD, KAIROS, SHIM, FAKEDRV, FAKEAPP = sys.argv[1:6]
env = functools.partial(preload_env, SHIM, FAKEDRV)
PAGE = 2 << 20
GPU = "gpu 0 GPU-usage-test 1073741824\n"
COUNTERS = ("kairos_tenant_gpu_seconds_total", "kairos_tenant_memory_held_byte_seconds_total",
            "kairos_tenant_allocations_refused_total")
TENANTS = ("team", "other")


def scrape(port):
    """{(metric, tenant): value} for the chargeback counters on GPU 0, and each
    tenant's created time under ("created", tenant)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name in COUNTERS and s.labels.get("gpu") == "0":
                out[(s.name, s.labels["tenant"])] = s.value
            elif s.name == "kairos_tenant_usage_created_seconds":
                out[("created", s.labels["tenant"])] = s.value
    return out


class Chargeback(unittest.TestCase):
    def setUp(self):
        self.port = free_port()
        tenants = ("  - name: team\n    memory: { 0: 64M }\n"
                   "    compute: { 0: { share: 50% } }\n"
                   "  - name: other\n    memory: { 0: 6M }\n")
        self.d = Daemon(KAIROSD, tenants_yaml=tenants, gpus=1, fake=GPU,
                        extra=f"metrics: 127.0.0.1:{self.port}\n"
                              "usage_save_interval_ms: 1000\n").start().wait_ready()
        self.procs = []

    def tearDown(self):
        reap(self.procs)
        self.d.stop()

    def run_tenant(self, tenant, pages):
        return start_holding(self, [KAIROS, "run", "--tenant", tenant, "--", FAKEAPP, "-n",
                                    str(pages), "-s", str(PAGE), "-c", str(PAGE), "-w", "120"],
                             env(**self.d.shim_env()), self.procs)

    def wait_scrape(self, pred, what, timeout=15.0):
        """The first scrape for which pred holds, within timeout seconds."""
        got = {}

        def scraped():
            try:
                got["last"] = scrape(self.port)
            except OSError:  # kairosd starting again
                return False
            return pred(got["last"])
        if wait_for(scraped, timeout=timeout, step=0.1):
            return got["last"]
        self.fail(f"{what}: last scrape {got.get('last')}\n{self.d.read_log()[-3000:]}")

    def assert_not_back(self, before, after, tenants=TENANTS):
        for name in COUNTERS:
            for t in tenants:
                self.assertGreaterEqual(after.get((name, t), 0), before.get((name, t), 0),
                                        (name, t, before, after))
        for t in tenants:
            self.assertEqual(after[("created", t)], before[("created", t)])

    def grown(self, base, tenants=TENANTS):
        """A predicate: GPU time and held memory of every tenant above base's."""
        return lambda s: all(s.get((n, t), 0) > base.get((n, t), 0)
                             for n in COUNTERS[:2] for t in tenants)

    def test_counters_survive_restarts_and_keep_counting(self):
        team = self.run_tenant("team", 4)
        other = self.run_tenant("other", 3)
        refused = subprocess.run([KAIROS, "run", "--tenant", "other", "--", FAKEAPP, "-n", "1",
                                  "-s", str(PAGE)], capture_output=True, text=True,
                                 env=env(**self.d.shim_env()), timeout=60)
        self.assertIn("failed", refused.stderr)  # beyond other's 6M: its context is refused
        self.d.write_fake(GPU + f"util 0 {team.pid} 50\nutil 0 {other.pid} 50\n")
        first = self.wait_scrape(self.grown({}), "counting began")
        self.assertGreater(first[(COUNTERS[2], "other")], 0)
        now = time.time()
        for t in TENANTS:
            self.assertLess(abs(first[("created", t)] - now), 60)

        # a stop: everything counted up to it is saved, and shown again at once
        before = self.wait_scrape(self.grown(first), "counting went on")
        self.d.stop()
        with open(self.d.state) as f:
            saved = json.load(f)["usage"]["tenants"]
        self.assertGreaterEqual(saved["team"]["gpus"]["0"]["gpu_us"] / 1e6,
                                before[(COUNTERS[0], "team")])
        self.d.start().wait_ready()
        after = scrape(self.port)
        self.assert_not_back(before, after)
        # the processes reattach and the counters go on
        after = self.wait_scrape(self.grown(after), "counting after a restart")

        # kill -9: what a scrape showed was saved already (the counters are shown as
        # of the last save), so nothing goes back
        last = self.wait_scrape(self.grown(after), "counting before the kill")
        self.d.proc.send_signal(signal.SIGKILL)
        self.d.proc.wait(10)
        self.d.stop()
        self.d.start().wait_ready()
        again = scrape(self.port)
        self.assert_not_back(last, again)
        self.wait_scrape(self.grown(again), "counting after a kill -9")

    def test_damaged_counters_lose_only_themselves(self):
        team = self.run_tenant("team", 2)
        other = self.run_tenant("other", 2)
        self.d.write_fake(GPU + f"util 0 {team.pid} 50\nutil 0 {other.pid} 50\n")
        before = self.wait_scrape(self.grown({}), "counting began")
        self.d.stop()
        with open(self.d.state) as f:
            doc = json.load(f)
        doc["usage"]["tenants"]["team"]["gpus"] = "garbage"
        with open(self.d.state, "w") as f:
            json.dump(doc, f)
        self.d.start().wait_ready()
        after = scrape(self.port)
        self.assertIn("usage of tenant 'team'", self.d.log_since_start().decode())
        self.assert_not_back(before, after, tenants=("other",))
        # team's counters begin again from 0, with a new creation time that says so
        self.assertLess(after.get((COUNTERS[0], "team"), 0), before[(COUNTERS[0], "team")])
        self.assertGreater(after[("created", "team")], before[("created", "team")])
        self.wait_scrape(self.grown(after), "counting after the damage")
        # a section that is not one at all: the tenants and the server are there
        self.d.stop()
        with open(self.d.state) as f:
            doc = json.load(f)
        doc["usage"] = 17
        with open(self.d.state, "w") as f:
            json.dump(doc, f)
        self.d.start().wait_ready()
        self.assertIn("usage: the section is not", self.d.log_since_start().decode())
        self.wait_scrape(self.grown({}), "counting after a section of garbage")


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
