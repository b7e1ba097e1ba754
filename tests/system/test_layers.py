#!/usr/bin/env python3
"""The CLI stands beside kairosd, not above it: `kairos` (kairos run --mem 80%
included: kairosd resolves percentages) links no daemon code. Checks that no file of
src/cli includes a daemon header, and that the kairos binary defines none of the
symbols the daemon library defines (nm).
Usage: test_layers.py KAIROS_BINARY DAEMON_LIBRARY SOURCE_ROOT"""
import os
import re
import shutil
import subprocess
import sys
import unittest

KAIROS, DAEMON_LIB, ROOT = sys.argv[1:4]


def defined(path, archive=False):
    r = subprocess.run(["nm", "--defined-only", *(["-g"] if archive else []), path],
                       capture_output=True, text=True, check=True)
    return {f[2] for f in (line.split() for line in r.stdout.splitlines())
            if len(f) == 3 and f[1] in "TDBR"}


class CliLinksNoDaemonCode(unittest.TestCase):
    def test_no_cli_source_includes_a_daemon_header(self):
        cli = os.path.join(ROOT, "src", "cli")
        for name in sorted(os.listdir(cli)):
            with open(os.path.join(cli, name), errors="replace") as f:
                for n, line in enumerate(f, 1):
                    self.assertFalse(re.match(r'\s*#\s*include\s*"daemon/', line),
                                     f"src/cli/{name}:{n}: {line.strip()}")

    @unittest.skipUnless(shutil.which("nm"), "nm (binutils) not installed")
    def test_the_kairos_binary_defines_no_daemon_symbol(self):
        daemon = defined(DAEMON_LIB, archive=True)
        self.assertIn("ledger_charge", daemon)  # the check reads the right library
        self.assertEqual(sorted(daemon & defined(KAIROS)), [])


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
