#!/usr/bin/env python3
"""A tenant process refused by kairosd's connection limits fails closed: its shim
reads the refusal (an ERROR with sequence 0, sent before any request) and denies
GPU access with kairosd's message, even where the node would fall open for a daemon
that is down. Without this, filling one's connection limit would be a way around
the quota. Uses the real libkairos.so and the fake driver.
Usage: test_shim_refused.py KAIROSD SHIM FAKEDRV FAKEAPP"""
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kairos_proto as kp  # noqa: E402

KAIROSD, SHIM, FAKEDRV, FAKEAPP = sys.argv[1:5]
ASAN_FIRST = os.environ.get("KAIROS_PRELOAD_FIRST", "")


class RefusedShim(unittest.TestCase):
    def setUp(self):
        self.d = kp.Daemon(KAIROSD, "  - name: team\n    memory: { 0: 64M }\n", gpus=1,
                           extra="max_connections: 3\n").start()
        self.held = []

    def tearDown(self):
        for c in self.held:
            c.close()
        self.assertEqual(self.d.stop(), 0)

    def fakeapp(self):
        e = {k: v for k, v in os.environ.items() if not k.startswith("KAIROS_")}
        e["LD_PRELOAD"] = " ".join(p for p in (ASAN_FIRST, SHIM, FAKEDRV) if p)
        e["ASAN_OPTIONS"] = "detect_leaks=0:verify_asan_link_order=0"
        e.update(self.d.shim_env(on_daemon_down="open"))  # the node falls open
        e.update(KAIROS_TENANT="team")
        return subprocess.run([FAKEAPP, "-n", "4", "-s", str(2 << 20)], capture_output=True,
                              text=True, env=e, timeout=60)

    def test_refused_connection_fails_closed(self):
        ok = self.fakeapp()  # with room: registered, allocates
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.held = [self.d.client() for _ in range(3)]  # every connection taken
        r = self.fakeapp()
        self.assertIn("GPU access refused", r.stderr)
        self.assertIn("kairosd has too many connections", r.stderr)
        self.assertNotIn("no quota in force", r.stderr)
        self.assertNotIn("unreachable", r.stderr)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
