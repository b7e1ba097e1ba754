#!/usr/bin/env python3
"""scripts/check-includes passes on the tree, and fails on a copy of the tree given an
include that points back up, an include across layers, a new circle between daemon
modules (within a folder or across two), an include from a daemon folder to one above it,
a new circle between daemon folders, a daemon module outside the folders, a known circle
or upward include that is gone (asking to delete its entry), or a path out to ../shared in
a meson.build.
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
        os.makedirs(os.path.dirname(os.path.join(self.tmp, rel)), exist_ok=True)
        with open(os.path.join(self.tmp, rel), "a") as f:
            f.write(text)

    def test_the_tree_passes(self):
        rc, out = run(ROOT)
        self.assertEqual(rc, 0, out)
        self.assertEqual(run(self.tmp), (0, out))  # the copy is the tree

    def test_an_include_pointing_back_up_fails(self):
        self.append("src/daemon/time/sched.c", '#include "../../shared/x.h"\n')
        rc, out = run(self.tmp)
        self.assertEqual(rc, 1, out)
        self.assertIn("src/daemon/time/sched.c", out)
        self.assertIn("points back up", out)

    def test_a_path_to_the_shared_folder_fails(self):
        os.makedirs(os.path.join(self.tmp, "tests"))
        self.append("tests/meson.build", "d = meson.project_source_root() / '..' / 'shared'\n")
        rc, out = run(self.tmp)
        self.assertEqual(rc, 1, out)
        self.assertIn("tests/meson.build:1: a path out to ../shared", out)

    def test_an_include_across_layers_fails(self):
        self.append("src/core/units.c", '#include "daemon/memory/ledger.h"\n')
        rc, out = run(self.tmp)
        self.assertEqual(rc, 1, out)
        self.assertIn("core may not include daemon", out)

    def test_a_new_circle_between_daemon_modules_fails(self):
        self.append("src/daemon/base/zz_one.c",
                    '#include "daemon/base/zz_one.h"\n#include "daemon/base/zz_two.h"\n')
        self.append("src/daemon/base/zz_two.h", '#include "daemon/base/zz_one.h"\n')
        rc, out = run(self.tmp)
        self.assertEqual(rc, 1, out)
        self.assertIn("src/daemon: a circle between modules: base/zz_one -> base/zz_two, "
                      "base/zz_two -> base/zz_one", out)

    def test_a_new_circle_between_modules_of_two_daemon_folders_fails(self):
        # observe/zz_top includes time/zz_low (down: allowed); time/zz_low including
        # observe/zz_top back closes a circle, and goes up.
        self.append("src/daemon/observe/zz_top.h", '#include "daemon/time/zz_low.h"\n')
        self.append("src/daemon/time/zz_low.c", '#include "daemon/observe/zz_top.h"\n')
        rc, out = run(self.tmp)
        self.assertEqual(rc, 1, out)
        self.assertIn("a circle between modules: observe/zz_top -> time/zz_low, "
                      "time/zz_low -> observe/zz_top", out)

    def test_an_include_down_the_daemon_folders_passes(self):
        self.append("src/daemon/observe/metrics.c", '#include "daemon/base/loop.h"\n')
        self.append("src/daemon/time/sched.c", '#include "daemon/time/slice_trim.h"\n')
        self.assertEqual(run(self.tmp)[0], 0)

    def test_an_include_up_the_daemon_folders_fails(self):
        self.append("src/daemon/base/loop.c", '#include "daemon/observe/metrics.h"\n')
        rc, out = run(self.tmp)
        self.assertEqual(rc, 1, out)
        self.assertIn('src/daemon/base/loop.c:', out)
        self.assertIn("base/ may not include observe/, which is above it in DAEMON_FOLDERS",
                      out)

    def test_a_new_circle_between_daemon_folders_fails(self):
        # observe/ includes memory/'s headers, and tenants/'s, which include memory/'s, so
        # one include from memory/ up to observe/ makes a circle of them (and of state/
        # and transport/, between them): a circle that is not known, and a known one, if
        # any is left, changed.
        self.append("src/daemon/memory/ledger.h", '#include "daemon/observe/audit.h"\n')
        rc, out = run(self.tmp)
        self.assertEqual(rc, 1, out)
        self.assertIn("memory/ may not include observe/", out)
        self.assertIn("src/daemon: a circle between folders: ", out)
        if runpy.run_path(SCRIPT)["KNOWN_FOLDER_CIRCLES"]:
            self.assertIn("src/daemon: the known circle between folders", out)

    def test_a_daemon_module_outside_the_folders_fails(self):
        self.append("src/daemon/zz_loose.c", '#include "daemon/base/log.h"\n')
        self.append("src/daemon/zz_new/zz.c", '#include "daemon/base/log.h"\n')
        self.append("src/daemon/base/zz_user.c", '#include "daemon/zz_loose.h"\n')
        rc, out = run(self.tmp)
        self.assertEqual(rc, 1, out)
        self.assertIn("src/daemon/zz_loose.c: only main.c lives in src/daemon/", out)
        self.assertIn("src/daemon/zz_new/ is no folder of DAEMON_FOLDERS", out)
        self.assertIn('#include "daemon/zz_loose.h: no folder of DAEMON_FOLDERS holds it', out)

    def test_a_known_upward_include_that_is_gone_asks_to_delete_its_entry(self):
        known = runpy.run_path(SCRIPT)["KNOWN_UPWARD"]
        if not known:
            self.skipTest("no known upward include left")
        file, inc = sorted(known)[0]
        rel = os.path.join(self.tmp, "src", "daemon", file)
        with open(rel) as f:
            lines = f.readlines()
        with open(rel, "w") as f:
            f.writelines(l for l in lines if f'"{inc}"' not in l)
        rc, out = run(self.tmp)
        self.assertEqual(rc, 1, out)
        self.assertIn(f"src/daemon/{file}: the known upward include {inc} is gone", out)
        self.assertIn("KNOWN_UPWARD", out)

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
