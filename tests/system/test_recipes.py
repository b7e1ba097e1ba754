#!/usr/bin/env python3
"""Every shell recipe of README.md and docs/*.md is in the reviewed table
tests/system/data/recipes.yaml, and those it says run here do, as written.

What a recipe is (the extraction rule):
- Every fenced block names its language (an unnamed fence fails the test, so a shell
  block cannot hide as one). Each line of a block in sh, console, shell or bash is a
  recipe: lines ending in a backslash are joined with the next, a console prompt "$ "
  is dropped, and so is a trailing comment (whitespace, then "#").
- Outside fenced blocks, a code span (it may wrap over a line break) is a recipe when
  its words, after an optional "sudo" and any NAME=value assignments, begin with
  kairos, kairosd, srun or sbatch and have at least one word more, or when it is
  NAME=value assignments followed by a command (KAIROS_MEM=8G LD_PRELOAD=... CMD).
A recipe's key is its text with runs of whitespace made one space. A recipe used in
several places has one entry.

The table gives each recipe "where": "here" (run by this test), "gpu SECTION" (a
section of scripts/gpu-suite), "test FILE[::NAME]" (a file of the repository, and a
test function or text in it, that runs it), "mention" (a subcommand or option named
in prose, not a command line) or "none" (no test runs it: "why" says why). The test
fails when a recipe is not in the table, when an entry is no longer in the docs, when
a "test" or "gpu" entry names a file, function or section that is not there, and when
a "here" recipe fails.

How a "here" recipe runs: by sh -c, in the order of the docs (README first, then
docs/*.md by name), in one working directory (where etc/ is the repository's), each
against a kairosd of its own started from etc/kairosd.yaml (its socket, state and
administrators changed: this test's uid) with one fake GPU of 80 GiB (the fake
driver's too), with PATH starting with links named kairos and kairosd to the build's
binaries (kairos finds the build's shim as it does on a source build),
a temporary HOME, and KAIROS_SOCKET and the shim's settings file naming that kairosd.
Before it runs, its text is changed by these rules only:
- "sudo " at the start of a command is dropped (this uid administers the kairosd);
- a program placeholder (CMD ARGS, CMD, ./my_cuda_program, ./app, ./server,
  python3 train.py, python3 serve.py) becomes cuda-app: the fake NVIDIA driver under
  whatever LD_PRELOAD it is given, and a CUDA-like program allocating 4 blocks of
  2 MiB and printing what it got and the GPU's size it saw;
- NAME becomes training (a tenant of etc/kairosd.yaml), SIZE 64M, unless the
  entry's "with" gives them other values;
- [optional parts] are left out; a word a|b|c runs the recipe once per alternative;
- an absolute path under /etc, /var or /run is taken under the test's root directory.
It must exit 0, and print what the entry's "expect" (a regular expression) says.
Usage: test_recipes.py SOURCE_ROOT KAIROSD KAIROS FAKEDRV FAKEAPP"""
import os
import re
import shlex
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import debian_python  # noqa: E402

debian_python.require("yaml")
import yaml  # noqa: E402
import kairos_proto as kp  # noqa: E402
from harness import ASAN_FIRST  # noqa: E402

ROOT, KAIROSD, KAIROS, FAKEDRV, FAKEAPP = map(os.path.abspath, sys.argv[1:6])
TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "recipes.yaml")
SHELLS = {"sh", "console", "shell", "bash"}
COMMANDS = {"kairos", "kairosd", "srun", "sbatch"}
FAKE_GPU = "gpu 0 GPU-fake-0000 85899345920\n"
PROGRAMS = ["CMD ARGS", "CMD", "./my_cuda_program", "./app", "./server", "python3 train.py",
            "python3 serve.py"]
WORDS = {"NAME": "training", "SIZE": "64M"}


def doc_files():
    """README.md and docs/*.md but docs/recipes.md, which lists recipes to say where
    they are tested (test_the_untested_are_listed checks it)."""
    docs = os.path.join(ROOT, "docs")
    return ["README.md"] + sorted(os.path.join("docs", f) for f in os.listdir(docs)
                                  if f.endswith(".md") and f != "recipes.md")


def normal(text):
    return " ".join(text.split())


def strip_comment(line):
    return re.split(r"\s#", line, maxsplit=1)[0]


def block_recipes(lines):
    """(line number, recipe) of each command line of a shell block."""
    out, pending, first = [], "", None
    for n, line in lines:
        first = first or n
        line = pending + line.strip()
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        line = strip_comment(line[2:] if line.startswith("$ ") else line)
        if line.strip():
            out.append((first, normal(line)))
        first = None
    return out


def is_command(span):
    try:
        words = shlex.split(span)
    except ValueError:
        words = span.split()
    if words[:1] == ["sudo"]:
        words = words[1:]
    assigned = False
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words, assigned = words[1:], True
    return (len(words) >= 2 and words[0] in COMMANDS) or (assigned and len(words) >= 1)


def extract(path):
    """(recipes, unnamed fences) of one file: recipes as (key, line)."""
    with open(os.path.join(ROOT, path)) as f:
        lines = f.read().split("\n")
    recipes, unnamed, prose, block, lang = [], [], [], None, None
    for i, line in enumerate(lines, 1):
        fence = re.match(r"^\s*```\s*(\S*)\s*$", line)
        if block is None and fence:
            block, lang = [], fence.group(1)
            if not lang:
                unnamed.append(f"{path}:{i}")
            prose.append("")
            continue
        if block is not None:
            if fence and not fence.group(1):
                if lang in SHELLS:
                    recipes += [(r, f"{path}:{n}") for n, r in block_recipes(block)]
                block = None
            else:
                block.append((i, line))
            prose.append("")
            continue
        prose.append(line)
    text = "\n".join(prose)
    for m in re.finditer(r"`([^`]+)`", text):
        if is_command(m.group(1)):
            recipes.append((normal(m.group(1)), f"{path}:{text.count(chr(10), 0, m.start()) + 1}"))
    return recipes, unnamed


def all_recipes():
    found, unnamed = {}, []
    for path in doc_files():
        recipes, fences = extract(path)
        unnamed += fences
        for key, where in recipes:
            found.setdefault(key, []).append(where)
    return found, unnamed


def load_table():
    with open(TABLE) as f:
        entries = yaml.safe_load(f)
    table = {}
    for e in entries:
        key = normal(e["recipe"])
        assert key not in table, f"recipes.yaml lists {key!r} twice"
        table[key] = e
    return table


def variants(recipe, root, words=None):
    """The command lines a "here" recipe runs, by the rules of the docstring."""
    text = re.sub(r"(^|&&\s*|;\s*)sudo\s+", r"\1", recipe)
    text = re.sub(r"\s*\[[^\]]*\]", "", text)
    for p in PROGRAMS:
        text = re.sub(rf"(^|\s){re.escape(p)}(?=\s|$)", r"\1cuda-app", text)
    for w, v in dict(WORDS, **(words or {})).items():
        text = re.sub(rf"\b{w}\b", v, text)
    text = re.sub(r"(^|[\s=])(/(?:etc|var|run)/)", rf"\1{root}\2", text)
    alt = re.search(r"(?<!\S)(\S+\|\S+)(?!\S)", text)
    if not alt:
        return [text]
    return [t for a in alt.group(1).split("|")
            for t in variants(text[:alt.start()] + a + text[alt.end():], root)]


class Recipes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.found, cls.unnamed = all_recipes()
        cls.table = load_table()

    def test_every_fence_names_its_language(self):
        self.assertEqual(self.unnamed, [], "name the language of these fenced blocks "
                         "(sh for commands, text for anything else)")

    def test_every_recipe_is_in_the_table(self):
        missing = [f"{k!r} ({', '.join(w)})" for k, w in self.found.items()
                   if k not in self.table]
        self.assertEqual(missing, [], "add these recipes to tests/system/data/recipes.yaml "
                         "and say where each is tested")

    def test_every_entry_is_still_in_the_docs(self):
        stale = [k for k in self.table if k not in self.found]
        self.assertEqual(stale, [], "these recipes.yaml entries are no longer in the docs")

    def test_every_entry_says_where_it_is_tested(self):
        with open(os.path.join(ROOT, "scripts", "gpu-suite")) as f:
            usage = f.read().split("\n\n", 1)[0]
        for key, e in self.table.items():
            where = e.get("where", "").split(None, 1)
            with self.subTest(recipe=key):
                self.assertIn(where[0] if where else "", {"here", "gpu", "test", "mention",
                                                          "none"})
                if where[0] == "none":
                    self.assertTrue(e.get("why"), "say why no test runs it")
                if where[0] == "gpu":
                    self.assertIn(f"[{where[1]}]", usage, "not a section of scripts/gpu-suite")
                if where[0] == "test":
                    self.check_test_pointer(where[1])

    def test_the_untested_are_listed(self):
        """docs/recipes.md names every recipe no test runs (by its first two words:
        the page may shorten the rest)."""
        with open(os.path.join(ROOT, "docs", "recipes.md")) as f:
            page = normal(f.read().replace("\\|", "|"))
        for key, e in self.table.items():
            if e.get("where") == "none":
                with self.subTest(recipe=key):
                    head = " ".join(key.split()[:2])
                    self.assertTrue(f"`{head}" in page, "list it in docs/recipes.md with why")

    def check_test_pointer(self, pointer):
        path, _, name = pointer.partition("::")
        self.assertTrue(os.path.isfile(os.path.join(ROOT, path)), f"no file {path}")
        if name:
            with open(os.path.join(ROOT, path)) as f:
                self.assertTrue(name in f.read(), f"{path} has no {name}")

    def test_the_recipes_that_run_here(self):
        here = [k for k in self.found if self.table.get(k, {}).get("where") == "here"]
        self.assertTrue(here)
        with tempfile.TemporaryDirectory(prefix="kairos-recipes-") as tmp:
            work = self.workdir(tmp)
            for key in here:
                entry = self.table[key]
                for line in variants(key, os.path.join(tmp, "root"), entry.get("with", {})):
                    with self.subTest(recipe=key, ran=line):
                        d = self.start_daemon(tmp)
                        try:
                            self.run_recipe(line, self.environment(tmp, d), work,
                                            entry.get("expect"), self.found[key][0], d)
                        finally:
                            d.stop()

    def run_recipe(self, line, env, work, expect, where, d):
        r = subprocess.run(["sh", "-c", line], cwd=work, env=env, capture_output=True,
                           text=True, timeout=30, stdin=subprocess.DEVNULL)
        out = r.stdout + r.stderr
        self.assertEqual(r.returncode, 0, f"{where}: {line}\n{out[-3000:]}\n"
                         f"kairosd:\n{d.read_log()[-2000:]}")
        if expect:
            self.assertRegex(out, expect, f"{where}: {line}")

    def start_daemon(self, tmp):
        d = kp.Daemon(KAIROSD, fake=FAKE_GPU, workdir=tempfile.mkdtemp(dir=tmp))
        with open(os.path.join(ROOT, "etc", "kairosd.yaml")) as f:
            text = f.read()
        for key, value in (("socket", d.socket), ("state", d.state),
                           ("admins", f"[{os.getuid()}]")):
            text, n = re.subn(rf"^{key}:.*$", f"{key}: {value}", text, flags=re.M)
            self.assertEqual(n, 1, key)
        with open(d.config, "w") as f:
            f.write(text)
        return d.start()

    def workdir(self, tmp):
        """The recipes' working directory and the programs on their PATH."""
        bindir, work = os.path.join(tmp, "bin"), os.path.join(tmp, "work")
        for p in (bindir, work, os.path.join(tmp, "home"), os.path.join(tmp, "root", "etc"),
                  os.path.join(tmp, "root", "var"), os.path.join(tmp, "root", "run")):
            os.makedirs(p)
        os.symlink(KAIROS, os.path.join(bindir, "kairos"))
        os.symlink(KAIROSD, os.path.join(bindir, "kairosd"))
        os.symlink(os.path.join(ROOT, "etc"), os.path.join(work, "etc"))
        app = os.path.join(bindir, "cuda-app")
        with open(app, "w") as f:
            f.write("#!/bin/sh\n# the docs' CMD: a CUDA-like program on the fake driver\n"
                    f'LD_PRELOAD="{ASAN_FIRST} $LD_PRELOAD {FAKEDRV}" '
                    f'exec {shlex.quote(FAKEAPP)} -n 4 -s 2097152\n')
        os.chmod(app, 0o755)
        return work

    def environment(self, tmp, d):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("KAIROS_") and k != "LD_PRELOAD"}
        env.update(PATH=f"{tmp}/bin:/usr/sbin:/usr/bin:/sbin:/bin", HOME=f"{tmp}/home",
                   FAKEDRV_FB_MIB="81920", KAIROS_SOCKET=d.socket,
                   ASAN_OPTIONS="detect_leaks=0:verify_asan_link_order=0", **d.shim_env())
        return env


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
