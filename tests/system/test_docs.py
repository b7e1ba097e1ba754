#!/usr/bin/env python3
"""The help texts and manual pages agree with the code: every command in the
command table has a manual page and is listed in kairos(1), every long option
of a command's --help is documented in its page, a short option letter means one
long option across every command, kairosd and the manual pages (the table of
kairos(1) included), `kairos help COMMAND` prints COMMAND's usage, and every script
under scripts/ answers --help with what it does, doing nothing else.
Usage: test_docs.py KAIROS_BINARY MAN_DIR KAIROSD_BINARY"""
import os
import re
import subprocess
import sys
import unittest

KAIROS, MAN, KAIROSD = sys.argv[1], sys.argv[2], sys.argv[3]
SHORT_IN_HELP = re.compile(r"^\s+-([A-Za-z0-9]), --([a-z][a-z-]*)", re.M)
SHORT_IN_MAN = re.compile(r"^\.BR? \\-([A-Za-z0-9]) \", \" \\-\\-([a-z][a-z\\-]*)", re.M)
SHORT_IN_TABLE = re.compile(r"^\.B \\-([A-Za-z0-9])\n\\-\\-([a-z][a-z\\-]*)", re.M)


def run(*args):
    return subprocess.run([KAIROS, *args], capture_output=True, text=True, timeout=30)


def commands():
    out = run("help").stdout
    block = out.split("commands:")[1]
    names = re.findall(r"^  (\S+)\s", block, re.M)
    return [n for n in names if n not in ("help", "version")]


class Docs(unittest.TestCase):
    def test_every_command_has_a_page_and_is_listed(self):
        main_page = open(os.path.join(MAN, "kairos.1")).read()
        self.assertTrue(commands())
        for name in commands():
            page = os.path.join(MAN, f"kairos-{name}.1")
            self.assertTrue(os.path.exists(page), f"no manual page for '{name}'")
            self.assertIn(f".B {name}\n", main_page, f"kairos.1 does not list '{name}'")

    def test_every_long_option_is_documented(self):
        for name in commands():
            help_text = run(name, "--help").stdout
            page = open(os.path.join(MAN, f"kairos-{name}.1")).read().replace("\\-", "-")
            for option in sorted(set(re.findall(r"(--[a-z][a-z-]+)", help_text))):
                self.assertIn(option, page, f"kairos-{name}.1 does not document {option}")


    def test_a_short_option_means_one_thing(self):
        seen = {}  # letter -> {long option: where}

        def note(letter, long, where):
            seen.setdefault(letter, {}).setdefault(long.replace("\\-", "-"), where)

        helps = [(f"kairos {n}", run(n, "--help").stdout) for n in commands()]
        helps.append(("kairos plan bench", run("plan", "bench", "--help").stdout))
        helps.append(("kairos plan trace", run("plan", "trace", "--help").stdout))
        helps.append(("kairosd", subprocess.run([KAIROSD, "--help"], capture_output=True,
                                                text=True, timeout=30).stdout))
        for where, text in helps:
            self.assertTrue(text, where)
            for letter, long in SHORT_IN_HELP.findall(text):
                note(letter, long, where)
        pages = [p for p in os.listdir(MAN) if p[-2:] in (".1", ".5", ".7", ".8")]
        for page in pages:
            text = open(os.path.join(MAN, page)).read()
            for letter, long in SHORT_IN_MAN.findall(text) + SHORT_IN_TABLE.findall(text):
                note(letter, long, page)
        self.assertIn("s", seen)  # the patterns found something
        clashes = {l: m for l, m in seen.items() if len(m) > 1}
        self.assertEqual(clashes, {}, "one short option, several meanings")
        self.assertEqual(seen["s"], {"socket": seen["s"]["socket"]})

    def test_help_command_shows_its_usage(self):
        for name in commands():
            r = run("help", name)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout, run(name, "--help").stdout)
            self.assertTrue(r.stdout.startswith(f"usage: kairos {name}"), r.stdout)
        r = run("help", "nope")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown command 'nope'", r.stderr)

    def test_every_script_answers_help(self):
        """Its opening comment or docstring (its own first sentence), exit 0, at once:
        scripts/test --help runs no test, install-deps --help installs nothing."""
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts")
        scripts = sorted(n for n in os.listdir(root) if os.access(os.path.join(root, n),
                                                                 os.X_OK))
        self.assertIn("gpu-suite", scripts)
        for name in scripts:
            path = os.path.join(root, name)
            head = open(path).read().split("\n")[1]
            first = re.sub(r'^(# |""")', "", head).split(" - ")[-1].split()[:4]
            r = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=60,
                               cwd="/")
            self.assertEqual(r.returncode, 0, f"{name}: {r.stderr[-500:]}")
            self.assertIn(" ".join(first), " ".join(r.stdout.split()), name)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
