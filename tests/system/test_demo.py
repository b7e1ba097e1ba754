#!/usr/bin/env python3
"""scripts/demo without a GPU (--cpu --no-setup, on this build): it runs to the end,
and what it says of the memory quota is what the program reported: the blocks it
got and those refused add up to those it asked for, it holds exactly the quota,
and it sees the quota as its GPU's size; the simulator's table comes with its
legend.
Usage: test_demo.py SOURCE_ROOT BUILD_DIR"""
import os
import re
import subprocess
import sys
import unittest

ROOT, BUILD = sys.argv[1], sys.argv[2]


class Demo(unittest.TestCase):
    def test_cpu_demo_says_what_it_shows(self):
        env = dict(os.environ, KAIROS_BUILD=BUILD)
        r = subprocess.run([os.path.join(ROOT, "scripts", "demo"), "--cpu", "--no-setup"],
                           capture_output=True, text=True, env=env, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        out = r.stdout
        self.assertIn("asks for 100 blocks of 2 MiB", r.stderr)
        app = dict(kv.split("=") for kv in re.search(r"^fakeapp: (.*)$", out, re.M)
                   .group(1).split())
        got = re.search(r"got:\s+the context and (\d+) blocks, (\d+) MiB \(allocs=(\d+)", out)
        refused = re.search(r"refused:\s+(\d+) blocks", out)
        gpu = re.search(r"its GPU:\s+(\d+) MiB, the quota", out)
        self.assertTrue(got and refused and gpu, out)
        blocks, mib, allocs = map(int, got.groups())
        self.assertEqual(blocks + int(refused.group(1)), 100)
        self.assertEqual(mib, 100)
        self.assertEqual(8 + 2 * blocks, 100)  # the context and the blocks: the quota
        self.assertEqual(allocs, int(app["allocs"]))
        self.assertEqual(int(app["vidmem_bytes"]), 100 << 20)
        self.assertEqual(int(refused.group(1)), int(app["failed"]))
        self.assertEqual(int(gpu.group(1)), 100)
        self.assertIn("--- summary: 1 process(es), 476 ioctls", out)
        self.assertIn("All figures are shares of the GPU's time", out)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
