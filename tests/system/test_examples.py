#!/usr/bin/env python3
"""The examples of the manual pages work against the sample configuration: every
`kairos run ... --share` of an EXAMPLES section (and of the README's quick start)
is run, with its command replaced by `true`, against a fresh kairosd started with
etc/kairosd.yaml (only its socket, state and administrators changed: this test's
uid may manage tenants) on one fake 80 GiB GPU, and must succeed with the policy it
asked for. The README's quick start creates /var/lib/kairos (the state's
directory) before it starts kairosd.
Usage: test_examples.py KAIROSD_BINARY KAIROS_BINARY SOURCE_ROOT"""
import json
import os
import re
import shlex
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kairos_proto as kp  # noqa: E402

KAIROSD, KAIROS, ROOT = sys.argv[1], sys.argv[2], sys.argv[3]
SAMPLE = os.path.join(ROOT, "etc", "kairosd.yaml")
FAKE_GPU = "gpu 0 GPU-fake-0000 85899345920\n"


def man_examples():
    """(page, command line) for each `kairos run` with --share in an .EX block."""
    found = []
    mandir = os.path.join(ROOT, "man")
    for page in sorted(os.listdir(mandir)):
        with open(os.path.join(mandir, page)) as f:
            text = f.read()
        for block in re.findall(r"^\.EX\n(.*?)^\.EE", text, re.M | re.S):
            block = block.replace("\\\\\n", " ").replace("\\-", "-")
            for line in block.splitlines():
                if "kairos run" in line and "--share" in line:
                    found.append((page, line.strip()))
    return found


def readme_quick_start():
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    block = text.split("## Sharing a GPU's memory", 1)[1].split("```sh\n", 1)[1]
    return block.split("```", 1)[0]


def sample_for_test(d):
    """etc/kairosd.yaml with the test's socket, state and administrators."""
    with open(SAMPLE) as f:
        text = f.read()
    for key, value in (("socket", d.socket), ("state", d.state),
                       ("admins", f"[{os.getuid()}]")):
        text, n = re.subn(rf"^{key}:.*$", f"{key}: {value}", text, flags=re.M)
        assert n == 1, key
    with open(d.config, "w") as f:
        f.write(text)


def as_test_command(line):
    """['kairos', 'run', ...options, '--', 'true'] from an example's line."""
    words = shlex.split(line.split("#")[0])
    if words[0] == "sudo":
        words = words[1:]
    assert words[:2] == ["kairos", "run"], line
    return words[2:words.index("--")] + ["--", "true"]


def policy_asked(args):
    want = {"share": None, "limit": None, "priority": "normal", "gpus": None, "tenant": None}
    for i, a in enumerate(args):
        if a.startswith("--") and a[2:] in want and i + 1 < len(args):
            want[a[2:]] = args[i + 1]
    return want


class Examples(unittest.TestCase):
    def setUp(self):
        self.d = kp.Daemon(KAIROSD, fake=FAKE_GPU)
        sample_for_test(self.d)
        self.d.start()
        self.shim = os.path.join(self.d.dir, "libkairos.so")  # kairos run needs one
        open(self.shim, "wb").close()

    def tearDown(self):
        self.d.stop()

    def kairos(self, *args):
        env = dict(os.environ, KAIROS_SOCKET=self.d.socket, KAIROS_SHIM=self.shim,
                   LD_PRELOAD="", **self.d.shim_env())
        return subprocess.run([KAIROS, *args], capture_output=True, text=True, env=env,
                              timeout=30)

    def check_example(self, where, line):
        args = as_test_command(line)
        r = self.kairos("run", *args)
        self.assertEqual(r.returncode, 0, f"{where}: {line}\n{r.stderr}")
        want = policy_asked(args)
        if not want["tenant"]:
            return  # an ephemeral tenant: gone with its command
        r = self.kairos("ps", "--json")
        tenants = {t["name"]: t for t in json.loads(r.stdout)["tenants"]}
        gpu = int(want["gpus"] or 0)
        c = tenants[want["tenant"]]["gpus"][gpu]["compute"]
        self.assertAlmostEqual(c["share"], float(want["share"].rstrip("%")) / 100, places=6)
        self.assertEqual(c["priority"], want["priority"])
        if want["limit"]:
            self.assertAlmostEqual(c["limit"], float(want["limit"].rstrip("%")) / 100, places=6)

    def test_every_share_example_of_the_manual_pages(self):
        examples = man_examples()
        self.assertTrue(examples, "no --share example found in man/")
        for page, line in examples:
            with self.subTest(page=page, line=line):
                self.tearDown()
                self.setUp()
                self.check_example(page, line)

    def test_the_readme_quick_start(self):
        text = readme_quick_start()
        lines = [l for l in text.splitlines() if l.strip()]
        mkdir = [i for i, l in enumerate(lines)
                 if re.match(r"(sudo )?mkdir -p .*/var/lib/kairos", l)]
        daemon = [i for i, l in enumerate(lines) if re.match(r"(sudo )?\S*kairosd\b", l)]
        self.assertTrue(mkdir and daemon and mkdir[0] < daemon[0], text)
        shares = [l for l in lines if "kairos run" in l and "--share" in l]
        self.assertTrue(shares)
        for line in shares:
            self.check_example("README.md", line)

    def test_shares_leave_room(self):
        """The sample's shares leave room on GPU 0; one share too many is refused
        with the sum named (what an example would meet with a full GPU)."""
        r = self.kairos("run", "--tenant", "one", "--mem", "1G", "--share", "30%", "--",
                        "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.kairos("run", "--tenant", "two", "--mem", "1G", "--share", "1%", "--", "true")
        self.assertEqual(r.returncode, 1)
        self.assertIn("101%", r.stderr)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
