#!/usr/bin/env python3
"""Driver compatibility (issue 25, item 8): the shim reads sizes with the layouts of
the driver branch it was built for, so on any other release it must not read them
at all. The fake driver plays a release (FAKEDRV_VERSION: its version handshake and
its /proc/driver/nvidia/version). On 580 a quota holds as always; on 590 the shim
refuses GPU use, or with unsupported_driver: passthrough in the node's shim.conf
lets the process through with no quota and a warning; whichever of the two sources
speaks first decides. A tenant cannot choose passthrough with a settings file of
its own.
Usage: test_driver_version.py SHIM FAKEDRV FAKEAPP"""
import functools
import os
import re
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import preload_env  # noqa: E402

SHIM, FAKEDRV, FAKEAPP = sys.argv[1:4]
env = functools.partial(preload_env, SHIM, FAKEDRV)
MiB = 1 << 20
PAGE = 2 * MiB
NOBODY = 65534


def vidmem(stdout):
    m = re.search(r"fakeapp: opens.*\bvidmem_bytes=(\d+)", stdout)
    return int(m.group(1)) if m else None


class DriverVersion(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kairos-driver-")
        os.chmod(self.dir, 0o755)

    def conf(self, text, owner=None):
        """A shim.conf the shim trusts (the test runner's, mode 0644), or one owned by
        owner (a tenant's own file)."""
        path = os.path.join(self.dir, f"shim-{abs(hash(text))}-{owner}.conf")
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o644)
        if owner is not None:
            os.chown(path, owner, owner)
        return path

    def fakeapp(self, *args, conf=None, user=None, **extra):
        """fakeapp allocating 64 pages (128 MiB) after the handshake, under a 64 MiB
        quota of its own."""
        e = env(KAIROS_MEM="64M", **extra)
        if conf:
            e["KAIROS_SHIM_CONF"] = conf
        pre = None
        if user is not None:
            def pre():
                os.setgroups([])
                os.setgid(user)
                os.setuid(user)
        return subprocess.run([FAKEAPP, "-V", "-n", "64", "-s", str(PAGE), "-c", str(PAGE),
                               *args], capture_output=True, text=True, env=e, timeout=60,
                              preexec_fn=pre)

    def test_the_release_built_for_keeps_its_quota(self):
        r = self.fakeapp(conf=self.conf("unsupported_driver: refuse\n"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(vidmem(r.stdout), 64 * MiB)  # context + 31 pages: the quota
        self.assertNotIn("NVIDIA driver", r.stderr)

    def test_another_release_is_refused_by_default(self):
        r = self.fakeapp(FAKEDRV_VERSION="590.44.01")
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("GPU access refused: NVIDIA driver 590.44.01 is not a release this "
                      "Kairos was built for (branch 580", r.stderr)
        self.assertIn("unsupported_driver: passthrough", r.stderr)  # what to do
        self.assertIsNone(vidmem(r.stdout))  # no allocation was made at all

    def test_the_handshake_decides_when_the_proc_file_is_missing(self):
        r = self.fakeapp(FAKEDRV_VERSION="590.44.01", FAKEDRV_NO_PROC_VERSION="1")
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("fakeapp: version handshake: Invalid argument", r.stderr)
        self.assertIn("NVIDIA driver 590.44.01 is not a release", r.stderr)

    def test_passthrough_is_the_nodes_choice_and_says_so(self):
        conf = self.conf("unsupported_driver: passthrough\n")
        r = self.fakeapp(conf=conf, FAKEDRV_VERSION="590.44.01")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("WARNING: NVIDIA driver 590.44.01", r.stderr)
        self.assertIn("NO memory quota", r.stderr)
        self.assertEqual(vidmem(r.stdout), 65 * PAGE)  # untouched: nothing read, nothing capped
        # on the release built for, the same node setting changes nothing
        r = self.fakeapp(conf=conf)
        self.assertEqual(vidmem(r.stdout), 64 * MiB, r.stderr)

    def test_a_tenant_cannot_choose_passthrough(self):
        """nobody names a shim.conf of its own that says passthrough: the shim ignores
        it (not root's), and the unsupported release is refused."""
        conf = self.conf("unsupported_driver: passthrough\n", owner=NOBODY)
        r = self.fakeapp(conf=conf, user=NOBODY, FAKEDRV_VERSION="590.44.01")
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("GPU access refused: NVIDIA driver 590.44.01", r.stderr)
        self.assertIsNone(vidmem(r.stdout))


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
