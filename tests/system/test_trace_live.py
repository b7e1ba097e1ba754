#!/usr/bin/env python3
"""kairos trace -- CMD, live, with the real libkairos.so above the fake NVIDIA driver:
the summary matches what the program says it did, a saved recording replays to the
same summary, every process of a command tree is traced, and the command's exit
status comes back.
Usage: test_trace_live.py KAIROS FAKEDRV_PRELOAD FAKEAPP"""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

KAIROS, FAKEDRV, FAKEAPP = sys.argv[1:4]
ASAN_FIRST = os.environ.get("KAIROS_PRELOAD_FIRST", "")


def env():
    e = dict(os.environ)
    e["LD_PRELOAD"] = " ".join(p for p in (ASAN_FIRST, FAKEDRV) if p)
    e.setdefault("ASAN_OPTIONS", "")
    e["ASAN_OPTIONS"] += ":detect_leaks=0:verify_asan_link_order=0"
    return e


def trace(*args):
    return subprocess.run([KAIROS, "trace", *args], capture_output=True, text=True, env=env(),
                          timeout=120)


def summary_of(stdout):
    return json.loads(stdout.splitlines()[-1])


def app_counts(text):
    line = next(l for l in text.splitlines() if l.startswith("fakeapp:"))
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}


class Live(unittest.TestCase):
    def test_summary_matches_the_program_and_the_replay(self):
        with tempfile.TemporaryDirectory() as d:
            rec, out = os.path.join(d, "r.nvtrace"), os.path.join(d, "out.jsonl")
            r = trace("--json", "--output", out, "--record", rec, "--", FAKEAPP, "-t", "4",
                      "-n", "40")
            self.assertEqual(r.returncode, 0, r.stderr)
            app = app_counts(r.stdout)
            live = summary_of(open(out).read())
            self.assertEqual(live["ioctls"], app["ioctls"])
            self.assertEqual(live["mmaps"], app["mmaps"])
            self.assertEqual(live["vidmem"]["allocations"], app["allocs"])
            self.assertEqual(live["vidmem"]["allocated_bytes"], app["vidmem_bytes"])
            self.assertEqual(live["vidmem"]["held_bytes"], 0)  # closing the fd freed the rest
            self.assertEqual(live["doorbell_mappings"], 1)
            replay = trace("--json", "--summary", "--replay", rec)
            self.assertEqual(replay.returncode, 0, replay.stderr)
            self.assertEqual(summary_of(replay.stdout), live)

    def test_every_process_of_a_tree_is_traced(self):
        script = f"{FAKEAPP} -n 5 & {FAKEAPP} -n 7 & wait"
        r = trace("--json", "--summary", "--", "sh", "-c", script)
        self.assertEqual(r.returncode, 0, r.stderr)
        s = summary_of(r.stdout)
        self.assertEqual(s["processes"], 2)
        apps = [app_counts(l) for l in r.stdout.splitlines() if l.startswith("fakeapp:")]
        self.assertEqual(s["vidmem"]["allocations"], sum(a["allocs"] for a in apps))

    def test_exit_status_of_the_command(self):
        self.assertEqual(trace("--summary", "--", "sh", "-c", "exit 3").returncode, 3)
        self.assertEqual(trace("--summary", "--", "sh", "-c", "kill -9 $$").returncode, 137)
        for args in (("--", "/nonexistent/program"), ("--json", "--", "no-such-command-kairos")):
            r = trace(*args)
            self.assertEqual(r.returncode, 1)
            self.assertIn(f"cannot run '{args[-1]}': No such file or directory", r.stderr)
            self.assertEqual(r.stdout, "")  # no empty summary that looks like a result


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
