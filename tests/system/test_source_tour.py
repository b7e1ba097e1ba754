#!/usr/bin/env python3
"""The README's source tour is complete and true: each folder of the tour under src/
names every .c file of that folder (and of its subfolders that have no entry of their
own), and every file name it gives (x.c, x.h, x.S) exists in that folder, so the tour
cannot drift from the tree.
Usage: test_source_tour.py SOURCE_ROOT"""
import os
import re
import sys
import unittest

ROOT = sys.argv[1]
# A file name of the tour: "ledger.c", "interposed.h", "loader_stub.S", not part of a
# longer path ("etc/sim/") or name ("kairos_spank.so").
NAME = re.compile(r"(?<![\w/.<>-])([A-Za-z_][\w-]*\.[chS])(?![\w.])")
ENTRY = re.compile(r"^(src/[\w/]+/|include/[\w/.]+)\s")


def tour():
    """{folder: text of its entry} for the entries of the README's source tour."""
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    block = text.split("## Source tour", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    entries, current = {}, None
    for line in block.splitlines():
        if line and not line[0].isspace():
            m = ENTRY.match(line)
            current = m.group(1).rstrip("/") if m else None
            if current:
                entries[current] = ""
        if current:
            entries[current] += line + "\n"
    return entries


def files_under(folder, suffixes):
    out = {}
    for d, _, names in os.walk(os.path.join(ROOT, folder)):
        for name in names:
            if name.endswith(suffixes):
                out[os.path.relpath(os.path.join(d, name), ROOT)] = name
    return out


class SourceTour(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.entries = tour()
        self.assertIn("src/daemon", self.entries)  # the parse found the tour

    def entry_of(self, path):
        """The tour's entry that covers path: the longest folder that holds it."""
        folders = [f for f in self.entries if path.startswith(f + "/")]
        return max(folders, key=len) if folders else None

    def test_every_c_file_of_src_is_named(self):
        missing = []
        for path, name in sorted(files_under("src", (".c",)).items()):
            entry = self.entry_of(path)
            if entry is None or name not in NAME.findall(self.entries[entry]):
                missing.append(path)
        self.assertEqual(missing, [], "README.md's source tour does not name these")

    def test_every_name_of_the_tour_exists(self):
        wrong = []
        for folder, text in self.entries.items():
            if not folder.startswith("src/"):
                continue
            present = set(files_under(folder, (".c", ".h", ".S")).values())
            wrong += [f"{folder}: {n}" for n in NAME.findall(text) if n not in present]
        self.assertEqual(wrong, [], "README.md's source tour names files that do not exist")

    def test_every_folder_of_src_with_c_files_has_an_entry(self):
        for path in files_under("src", (".c",)):
            self.assertIsNotNone(self.entry_of(path), path)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
