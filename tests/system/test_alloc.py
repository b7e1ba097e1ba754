#!/usr/bin/env python3
"""The allocation path's cost to kairosd and its exactness (issue 25, items 10 and 13),
played with the real kairosd, libkairos.so and the fake NVIDIA driver:
- an application that retries a refused allocation in a tight loop: kairosd hears
  of it O(1) times (kairos_tenant_grant_requests_total), not once per attempt, and
  the retry succeeds promptly once another member of the tenant frees memory;
- 8 threads of one process racing allocations and frees near the quota: the driver
  never holds more than the quota.
Usage: test_alloc.py KAIROSD KAIROS SHIM FAKEDRV FAKEAPP"""
import functools
import os
import re
import subprocess
import sys
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kairos_proto as kp  # noqa: E402
from harness import driver_peak, free_port, line_counts, preload_env, wait_for  # noqa: E402

KAIROSD, KAIROS, SHIM, FAKEDRV, FAKEAPP = sys.argv[1:6]
env = functools.partial(preload_env, SHIM, FAKEDRV)
MiB = 1 << 20
QUOTA = 64 * MiB
RETRIES = 3000



class AllocTest(unittest.TestCase):
    def setUp(self):
        self.port = free_port()
        self.d = kp.Daemon(KAIROSD, tenants_yaml="  - name: team\n    memory: { 0: 64M }\n",
                           gpus=1, extra=f"metrics: 127.0.0.1:{self.port}\n").start()
        self.d.wait_ready()
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait(10)
            for f in (p.stdout, p.stderr):
                f.close()
        self.d.stop()

    def run_tenant(self, *args, **extra):
        p = subprocess.Popen([KAIROS, "run", "--tenant", "team", "--", FAKEAPP, *args],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env(**extra, **self.d.shim_env()))
        self.procs.append(p)
        return p

    def line(self, p, prefix):
        """The first line of p's output that starts with prefix (its counts)."""
        for line in p.stdout:
            if line.startswith(prefix):
                return line_counts(line)
        p.wait(10)
        self.fail(f"no '{prefix}' line (rc {p.returncode}): {p.stderr.read()}")

    def requests(self):
        """kairos_tenant_grant_requests_total of team on GPU 0 (a fresh scrape)."""
        url = f"http://127.0.0.1:{self.port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as r:
            text = r.read().decode()
        m = re.search(r'^kairos_tenant_grant_requests_total\{tenant="team",gpu="0"\} (\d+)$',
                      text, re.M)
        self.assertIsNotNone(m, "kairos_tenant_grant_requests_total is not exported")
        return int(m.group(1))

    def held(self):
        return self.d.ps()["team"]["held"][0]

    def refusals(self):
        return self.d.ps()["team"]["refusals"][0]


class RetriedRefusal(AllocTest):
    def holder(self):
        """A member holding 48 MiB of the 64 (2 MiB context and 46 MiB) until killed."""
        a = self.run_tenant("-n", "1", "-s", str(46 * MiB), "-c", str(2 * MiB), "-w", "600")
        self.assertEqual(self.line(a, "fakeapp: holding")["vidmem_bytes"], 48 * MiB)
        return a

    def test_retry_loop_asks_kairosd_o1_times(self):
        """B retries 32 MiB (16 MiB left) 3000 times: every attempt is refused, and
        kairosd receives a handful of requests (its context's, the first refusal's,
        one per second of retrying at most), not 3000. Before the fix: one per
        attempt."""
        self.holder()
        before = self.requests()
        t0 = time.monotonic()
        b = self.run_tenant("-n", "0", "-s", str(32 * MiB), "-c", str(2 * MiB), "-R", str(RETRIES))
        r = self.line(b, "fakeapp: rounds")
        elapsed = time.monotonic() - t0
        self.assertEqual((r["failed"], r["n"]), (RETRIES, RETRIES))
        self.assertEqual(self.line(b, "fakeapp: opens")["failed"], 0)
        b.wait(30)
        asked = self.requests() - before
        print(f"{asked} requests for {RETRIES} attempts in {elapsed:.2f} s (p50 "
              f"{r['p50_ns'] / 1000:.1f} us)", file=sys.stderr)
        self.assertLessEqual(asked, 8 + 2 * int(elapsed + 1),
                             f"{asked} requests for {RETRIES} attempts in {elapsed:.1f} s")
        self.assertGreaterEqual(asked, 2)  # the context, the first refusal

    def test_retry_succeeds_promptly_after_another_member_frees(self):
        """B retries 32 MiB in a tight loop while A holds 48 MiB; once kairosd has
        refused B, A frees (it exits): B's retry succeeds well within the deadline
        (kairosd's ROOM notice ends the shim's memory of the refusal; a lost notice
        would cost at most KAIROS_REFUSAL_MEMORY_MS), and it was never let past the
        quota."""
        a = self.holder()
        refused = self.refusals()
        b = self.run_tenant("-n", "0", "-s", str(32 * MiB), "-c", str(2 * MiB), "-Y", "1000000000")
        self.assertTrue(wait_for(lambda: self.refusals() > refused, timeout=20))
        t0 = time.monotonic()
        a.kill()
        a.wait(10)
        r = self.line(b, "fakeapp: retry")
        took = time.monotonic() - t0
        self.assertEqual(r["ok"], 1, r)
        self.assertGreater(r["attempts"], 1)
        self.assertLess(took, 10, f"the retry took {took:.2f} s after the free")
        print(f"retry succeeded {took * 1000:.0f} ms after the free, {r['attempts']} attempts",
              file=sys.stderr)
        self.assertEqual(self.line(b, "fakeapp: opens")["failed"], 0)
        b.wait(30)
        self.assertTrue(wait_for(lambda: self.held() == 0), self.held())


class RacingThreads(AllocTest):
    def test_eight_threads_racing_never_exceed_the_quota(self):
        """8 threads of one process allocate and free 8 MiB 300 times each, at once,
        with 62 MiB left beside a 2 MiB context (room for 7 blocks): the driver never
        holds more than the quota, and the ledger ends at 0."""
        journal = os.path.join(self.d.dir, "journal")
        p = self.run_tenant("-t", "8", "-n", "0", "-s", str(8 * MiB), "-c", str(2 * MiB),
                            "-R", "300", FAKEDRV_JOURNAL=journal)
        r = self.line(p, "fakeapp: rounds")
        self.assertEqual(r["n"], 8 * 300)
        p.wait(60)
        peak = driver_peak(journal)
        self.assertLessEqual(peak, QUOTA)
        # they did race: 2 blocks at once or more (a 2-core machine under a full test run
        # saw no more than 3 at once in one run of many: 26 MiB)
        self.assertGreaterEqual(peak, 18 * MiB)
        self.assertTrue(wait_for(lambda: self.held() == 0), self.held())


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
