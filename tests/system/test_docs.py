#!/usr/bin/env python3
"""The help texts and manual pages agree with the code: every command in the
command table has a manual page and is listed in kairos(1), and every long option
of a command's --help is documented in its page.
Usage: test_docs.py KAIROS_BINARY MAN_DIR"""
import os
import re
import subprocess
import sys
import unittest

KAIROS, MAN = sys.argv[1], sys.argv[2]


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


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
