#!/usr/bin/env python3
"""kairos trace --replay: the decoded output and summary of the H200 recording, and
bad input reported with its line number without crashing the decoder.
Usage: test_trace_replay.py KAIROS_BINARY FIXTURES_DIR"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

KAIROS, FIXTURES = sys.argv[1], sys.argv[2]
SPIN = os.path.join(FIXTURES, "h200-580.159.04-cuda13.0-spin.nvtrace")


def kairos(*args, stdin=None):
    return subprocess.run([KAIROS, *args], input=stdin, capture_output=True, text=True,
                          timeout=60)


class ReplayFixture(unittest.TestCase):
    def test_json_summary_has_the_recordings_counts(self):
        r = kairos("trace", "--json", "--replay", SPIN)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = [json.loads(l) for l in r.stdout.splitlines()]
        summary = lines[-1]
        self.assertEqual(summary["event"], "summary")
        calls = {(c["node"], c["escape"]): c["calls"] for c in summary["calls"]}
        self.assertEqual(calls[("nvidiactl", "RM_ALLOC")], 113)
        self.assertEqual(calls[("nvidiaN", "RM_ALLOC")], 8)
        self.assertEqual(calls[("nvidiactl", "RM_CONTROL")], 196)
        self.assertEqual(calls[("nvidiactl", "RM_MAP_MEMORY")], 30)
        self.assertEqual(summary["vidmem"]["allocations"], 19)
        self.assertEqual(summary["channel_groups"], 4)
        self.assertEqual(summary["channels"], 20)
        self.assertEqual(summary["doorbell_objects"], 2)
        self.assertEqual(summary["doorbell_mappings"], 2)
        self.assertEqual(summary["ioctls"], 476)
        sizes = {e.get("size") for e in lines
                 if e.get("escape") == "RM_ALLOC" and e.get("mem") == "vidmem"}
        self.assertIn(0x19E00000, sizes)
        self.assertIn(0x40000000, sizes)
        # every event line names its escape, class and status by name where known
        allocs = [e for e in lines if e.get("escape") == "RM_ALLOC"]
        self.assertTrue(all(e["class"] for e in allocs))
        self.assertTrue(all(e["status"] == "NV_OK" for e in allocs))

    def test_text_output_and_summary(self):
        r = kairos("trace", "--replay", SPIN)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout
        self.assertIn("NV01_MEMORY_LOCAL_USER(0x40) size=0x40000000(1024.0MiB) mem=vidmem", out)
        self.assertIn("maps=doorbell", out)
        self.assertIn("channel groups: 4, channels: 20, doorbell objects: 2, doorbell mappings: 2",
                      out)
        self.assertRegex(out, r"nvidiactl\s+RM_ALLOC\s+113")

    def test_summary_only_and_stdin(self):
        with open(SPIN) as f:
            r = kairos("trace", "--summary", "--replay", "-", stdin=f.read())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.lstrip().startswith("--- summary"))


class BadInput(unittest.TestCase):
    def replay(self, text, *extra):
        with tempfile.NamedTemporaryFile("w", suffix=".nvtrace", delete=False) as f:
            f.write(text)
        try:
            return kairos("trace", *extra, "--replay", f.name), f.name
        finally:
            os.unlink(f.name)

    def test_unreadable_lines_are_reported_with_their_number(self):
        good = open(SPIN).read().splitlines()[:8]
        text = "\n".join(good[:3] + [good[3][:57]] + good[4:] + ["Z nonsense", ""])
        r, name = self.replay(text)
        self.assertEqual(r.returncode, 1)
        self.assertIn(f"{name}:4:", r.stderr)
        self.assertIn(f"{name}:9: unknown line kind", r.stderr)
        self.assertIn("unreadable line(s)", r.stdout)
        self.assertIn("RM_CONTROL", r.stdout)  # the lines after the bad one still decode

    def test_unknown_escape_and_wrong_size_are_flagged(self):
        text = ("S start pid=1\nO fd=3 /dev/nvidiactl\n"
                "I t=1 tid=1 c fd=3 nr=0x7e sz=8 r=-1 e=22 dt=1 B=0000000000000000 A=\n"
                "I t=2 tid=1 c fd=3 nr=0x29 sz=20 r=-1 e=22 dt=1 B= A=\n"
                "I t=3 tid=1 0 fd=3 nr=0x2a sz=32 r=0 e=0 dt=1 B= A=\n")
        r, _ = self.replay(text, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        events = [json.loads(l) for l in r.stdout.splitlines()]
        problems = [e.get("problem") for e in events if e.get("event") == "ioctl"]
        self.assertEqual(problems, ["unknown-request", "wrong-size", "wrong-node"])
        self.assertEqual(events[-1]["problems"], 3)

    def test_random_bytes_never_crash_the_decoder(self):
        data = os.urandom(20000).decode("latin-1").replace("\0", "")
        r, _ = self.replay(data)
        self.assertIn(r.returncode, (0, 1))
        self.assertIn("--- summary", r.stdout)


class Usage(unittest.TestCase):
    def test_usage_errors_exit_2(self):
        self.assertEqual(kairos("trace").returncode, 2)
        self.assertEqual(kairos("trace", "--bogus").returncode, 2)
        self.assertEqual(kairos("nosuchcommand").returncode, 2)
        for args in (("--replay", "/nonexistent/file"), ("--json", "--replay", "/nope")):
            r = kairos("trace", *args)
            self.assertEqual(r.returncode, 1)
            self.assertIn("cannot open '", r.stderr)
            self.assertIn("No such file or directory", r.stderr)
            self.assertEqual(r.stdout, "")  # no empty summary that looks like a result
        self.assertEqual(kairos("trace", "-s", "--replay", SPIN).returncode, 2)  # -s is --socket

    def test_help(self):
        r = kairos("trace", "--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("--replay", r.stdout)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
