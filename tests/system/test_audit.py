#!/usr/bin/env python3
"""The audit of kairosd against the fake GPU backend, without root or GPU: per-tenant
sums (4 x 0.9 GiB in a 1 GiB tenant), process lists beyond any fixed size.
Usage: test_audit.py KAIROSD_BINARY"""
import os
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kairos_proto as kp  # noqa: E402

KAIROSD = sys.argv[1]
GiB = kp.GiB
FAKE = "gpu 0 GPU-fake-0000 85899345920\ngpu 1 GPU-fake-0001 85899345920\n"
NO_SUCH_PID = 4194304 + 1000  # above any pid_max: never a real process

MEMBER = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
import kairos_proto as kp
c = kp.Client(sys.argv[2])
c.hello(sys.argv[3])
os.write(1, b"ready\n")
sys.stdin.read()
"""


def wait_for(pred, timeout=5.0, step=0.01):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return pred()


class AuditCase(unittest.TestCase):
    tenants = "  - name: small\n    memory: { 0: 1G }\n"
    extra = "audit: { interval_ms: 100 }\n"

    def setUp(self):
        self.d = kp.Daemon(KAIROSD, self.tenants, fake=FAKE, extra=self.extra)
        self.d.start()
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        self.d.stop()

    def member(self, tenant):
        """A process registered with kairosd as a member of tenant, until killed."""
        p = subprocess.Popen([sys.executable, "-c", MEMBER, os.path.dirname(kp.__file__),
                              self.d.socket, tenant], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)
        self.procs.append(p)
        self.assertEqual(p.stdout.readline(), b"ready\n")
        return p

    def stranger(self, name="sleep"):
        """A process that never registered."""
        p = subprocess.Popen(["sleep", "60"] if name == "sleep" else
                             ["bash", "-c", f"exec -a {name} sleep 60"])
        self.procs.append(p)
        return p

    def log(self):
        return self.d.read_log()


class TenantSums(AuditCase):
    def test_four_processes_of_0_9_gib_in_a_1_gib_tenant_reported(self):
        ms = [self.member("small") for _ in range(4)]
        used = int(0.9 * GiB)
        self.d.write_fake(FAKE + "".join(f"proc 0 {m.pid} {used}\n" for m in ms))
        self.assertTrue(wait_for(lambda: "tenant small: its 4 process(es) together use 3.60 GiB "
                                 "on GPU 0, above the tenant's quota of 1.00 GiB" in self.log()),
                        self.log())
        for m in ms:
            self.assertIn(f"{m.pid} 921.6 MiB", self.log())
        # reported once while it lasts, and nobody killed (action report)
        time.sleep(0.35)
        self.assertEqual(self.log().count("tenant small: its 4 process(es)"), 1)
        self.assertTrue(all(m.poll() is None for m in ms))

    def test_within_quota_together_not_reported(self):
        ms = [self.member("small") for _ in range(4)]
        self.d.write_fake(FAKE + "".join(f"proc 0 {m.pid} {GiB // 4}\n" for m in ms))
        time.sleep(0.5)
        self.assertNotIn("above the tenant's quota", self.log())
        self.assertNotIn("registered tenant", self.log())

    def test_no_fixed_limit_on_processes_per_gpu(self):
        """2000 listed processes before the one that matters: it is still seen."""
        s = self.stranger()
        lines = "".join(f"proc 0 {NO_SUCH_PID + i} 4096\n" for i in range(2000))
        self.d.write_fake(FAKE + lines + f"proc 0 {s.pid} {GiB}\n")
        self.assertTrue(wait_for(lambda: f"pid {s.pid} (sleep" in self.log()), self.log())


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
