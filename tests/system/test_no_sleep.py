#!/usr/bin/env python3
"""No system test waits on the clock for something to happen: outside the harness
(harness.py, kairos_proto.py) no test calls time.sleep. A test waits on its condition
with a deadline (wait_for, polling, wait_ready), and the bounded waits that remain are
named for what they are: hold_still (checking that something does not happen) and
pass_time (a duration the code under test measures). Programs a test runs as text
(python3 -c "...") are workloads, not waits, and are not read.
Usage: test_no_sleep.py [TESTS_DIR]"""
import ast
import os
import sys
import unittest

HERE = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
HARNESS = {"harness.py", "kairos_proto.py", "proto_h.py"}


def sleeps(path):
    """(line, text) of each call of time.sleep (or a sleep imported from time)."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    names = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
             and n.module == "time" for a in n.names if a.name == "sleep"}
    out = []
    for n in ast.walk(tree):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        if (isinstance(f, ast.Attribute) and f.attr == "sleep" and
                isinstance(f.value, ast.Name) and f.value.id == "time") or \
                (isinstance(f, ast.Name) and f.id in names):
            out.append((n.lineno, ast.unparse(n)))
    return out


class NoBareSleep(unittest.TestCase):
    def test_no_test_sleeps_outside_the_harness(self):
        found = []
        files = sorted(f for f in os.listdir(HERE) if f.endswith(".py"))
        self.assertIn("test_audit.py", files)
        for name in files:
            if name not in HARNESS:
                found += [f"{name}:{line}: {text}"
                          for line, text in sleeps(os.path.join(HERE, name))]
        self.assertEqual(found, [], "wait on the condition (wait_for, polling), or name the "
                                   "bounded wait (hold_still, pass_time in harness.py)")

    def test_the_check_sees_a_sleep(self):
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".py") as f:
            f.write("import time\nfrom time import sleep as nap\n"
                    "P = 'time.sleep(9)'\ntime.sleep(1)\nnap(2)\n")
            f.flush()
            self.assertEqual(sleeps(f.name), [(4, "time.sleep(1)"), (5, "nap(2)")])


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
