#!/usr/bin/env python3
"""scripts/check-includes passes on the tree, and fails on a copy of the tree given an
include that points back up, an include across layers, a new circle between daemon
modules, a known circle that is gone (asking to delete its entry), or a path out to
../shared in a meson.build.
Usage: test_check_includes.py SOURCE_ROOT"""
import os
import runpy
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = sys.argv[1]
SCRIPT = os.path.join(ROOT, "scripts", "check-includes")


def run(root):
    r = subprocess.run([sys.executable, SCRIPT, root], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


class CheckIncludes(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kairos-includes-")
        for top in ("src", "include"):
            shutil.copytree(os.path.join(ROOT, top), os.path.join(self.tmp, top))

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def append(self, rel, text):
        with open(os.path.join(self.tmp, rel), "a") as f:
            f.write(text)

    def test_the_tree_passes(self):
        rc, out = run(ROOT)
        self.assertEqual(rc, 0, out)
        self.assertEqual(run(self.tmp), (0, out))  # the copy is the tree

    def test_an_include_pointing_back_up_fails(self):
        self.append("src/daemon/sched.c", '#include "../../shared/x.h"\n')
        rc, out = run(self.tmp)
        self.assertEqual(rc, 1, out)
        self.assertIn("src/daemon/sched.c", out)
        self.assertIn("points back up", out)

    def test_a_path_to_the_shared_folder_fails(self):
        os.makedirs(os.path.join(self.tmp, "tests"))
        self.append("tests/meson.build", "d = meson.project_source_root() / '..' / 'shared'\n")
        rc, out = run(self.tmp)
        self.assertEqual(rc, 1, out)
        self.assertIn("tests/meson.build:1: a path out to ../shared", out)

    def test_an_include_across_layers_fails(self):
        self.append("src/core/units.c", '#include "daemon/ledger.h"\n')
        rc, out = run(self.tmp)
        self.assertEqual(rc, 1, out)
        self.assertIn("core may not include daemon", out)

    def test_a_new_circle_between_daemon_modules_fails(self):
        self.append("src/daemon/zz_one.c",
                    '#include "daemon/zz_one.h"\n#include "daemon/zz_two.h"\n')
        self.append("src/daemon/zz_two.h", '#include "daemon/zz_one.h"\n')
        rc, out = run(self.tmp)
        self.assertEqual(rc, 1, out)
        self.assertIn("src/daemon: a circle between modules: zz_one -> zz_two, zz_two -> zz_one",
                      out)

    def test_a_known_circle_that_is_gone_asks_to_delete_its_entry(self):
        known = runpy.run_path(SCRIPT)["KNOWN_CIRCLES"]
        if not any(known.values()):
            self.skipTest("no known circle left")
        component, circle = next((c, sorted(v[0])) for c, v in known.items() if v)
        for m in circle:
            for ext in (".c", ".h"):
                rel = f"src/{component}/{m}{ext}"
                if os.path.exists(os.path.join(self.tmp, rel)):
                    with open(os.path.join(self.tmp, rel)) as f:
                        lines = f.readlines()
                    with open(os.path.join(self.tmp, rel), "w") as f:
                        f.writelines(l for l in lines if not any(
                            f'"{component}/{o}.h"' in l for o in circle if o != m))
        rc, out = run(self.tmp)
        self.assertEqual(rc, 1, out)
        self.assertIn(f"the known circle {circle} is gone", out)
        self.assertIn("KNOWN_CIRCLES", out)

if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
