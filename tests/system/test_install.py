#!/usr/bin/env python3
"""`meson install` into a DESTDIR gives a working system, run from there: the
installed kairos finds the installed libkairos.so by itself (no KAIROS_SHIM), the
installed kairosd (fake GPU) serves it, and a fake-driver program started with
`kairos run` is refused beyond its tenant's quota; every manual page of man/ is
installed; the example configuration is valid and leaves part of GPU 0 for tenants
created at run time; the tmpfiles.d entries make /run/kairos and /var/lib/kairos
(systemd-tmpfiles --root); the unit starts the installed kairosd as Type=notify and
passes `systemd-analyze verify` (when the machine has systemd-analyze).
Usage: test_install.py BUILD_ROOT SOURCE_ROOT FAKEDRV FAKEAPP"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import debian_python  # noqa: E402
from kairos_proto import Daemon  # noqa: E402

debian_python.require("yaml")
import yaml  # noqa: E402

BUILD, ROOT, FAKEDRV, FAKEAPP = sys.argv[1:5]
ASAN_FIRST = os.environ.get("KAIROS_PRELOAD_FIRST", "")
MiB = 1 << 20
DESTDIR = tempfile.mkdtemp(prefix="kairos-destdir-")
INSTALLED = {}  # file name -> its path under DESTDIR


def install():
    r = subprocess.run(["meson", "install", "-C", BUILD, "--no-rebuild", "--quiet",
                        "--destdir", DESTDIR], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run(["meson", "introspect", "--installed", BUILD], capture_output=True,
                       text=True, timeout=60, check=True)
    for dest in json.loads(r.stdout).values():
        INSTALLED[os.path.basename(dest)] = DESTDIR + dest


def read(path):
    with open(path) as f:
        return f.read()


def unit_settings(path):
    settings = {}
    for line in read(path).splitlines():
        m = re.match(r"^([A-Za-z]+)=(.*)$", line.strip())
        if m:
            settings.setdefault(m.group(1), []).append(m.group(2))
    return settings


class Installed(unittest.TestCase):
    def test_every_manual_page_is_installed(self):
        pages = [p for p in os.listdir(os.path.join(ROOT, "man")) if re.search(r"\.[1-8]$", p)]
        self.assertGreater(len(pages), 10)
        for page in pages:
            if page == "kairos_spank.8" and "kairos_spank.so" not in INSTALLED:
                continue  # built without libslurm-dev: neither the plugin nor its page
            self.assertIn(page, INSTALLED, f"man/{page} is not in man/meson.build")
            where = INSTALLED[page]
            self.assertTrue(where.endswith(f"/man{page[-1]}/{page}"), where)
            self.assertTrue(os.path.isfile(where), where)

    def test_the_example_configuration_is_valid_and_leaves_room(self):
        example = INSTALLED["kairosd.yaml"]
        self.assertIn("/doc/kairos/examples/", example)
        with tempfile.TemporaryDirectory() as d:
            fake = os.path.join(d, "gpus.txt")
            with open(fake, "w") as f:
                f.write("gpu 0 GPU-fake-0000 85899345920\n")
            r = subprocess.run([INSTALLED["kairosd"], "-c", example, "--check", "--fake-gpu", fake],
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)
        doc = yaml.safe_load(read(example))
        shares = [float(str(t["compute"][0]["share"]).rstrip("%"))
                  for t in doc["tenants"] if 0 in t.get("compute", {})]
        self.assertLess(sum(shares), 100)  # `kairos run --share 30%` has room on GPU 0

    def test_tmpfiles_make_the_directories(self):
        conf = INSTALLED["kairos.conf"]
        self.assertIn("/lib/tmpfiles.d/", conf)
        tool = shutil.which("systemd-tmpfiles")
        if not tool:
            self.skipTest("no systemd-tmpfiles on this machine")
        with tempfile.TemporaryDirectory() as root:
            r = subprocess.run([tool, "--create", f"--root={root}", conf], capture_output=True,
                               text=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(os.stat(os.path.join(root, "run/kairos")).st_mode & 0o7777, 0o755)
            self.assertEqual(os.stat(os.path.join(root, "var/lib/kairos")).st_mode & 0o7777, 0o700)

    def test_the_unit_starts_the_installed_kairosd(self):
        unit = INSTALLED["kairosd.service"]
        self.assertIn("/lib/systemd/system/", unit)
        s = unit_settings(unit)
        self.assertEqual(s["Type"], ["notify"])
        (exec_start,) = s["ExecStart"]
        self.assertEqual(DESTDIR + exec_start, INSTALLED["kairosd"])
        self.assertEqual(s["RuntimeDirectory"], ["kairos"])
        self.assertEqual(s["RuntimeDirectoryPreserve"], ["yes"])  # CDI containers bind it
        self.assertEqual(s["StateDirectory"], ["kairos"])
        self.assertNotIn("ProtectProc", s)   # other users' /proc/PID: membership, audit
        self.assertNotIn("PrivateDevices", [k for k, v in s.items() if v == ["yes"]])
        self.assertIn("WatchdogSec", s)
        # every sandboxing option is explained by a comment just above it
        lines = read(unit).splitlines()
        for i, line in enumerate(lines):
            if re.match(r"^(Protect|Private|Restrict|Capability|SystemCall|Device)", line):
                j = i - 1
                while j >= 0 and re.match(r"^[A-Za-z]+=", lines[j]):
                    j -= 1
                self.assertTrue(lines[j].startswith("#"), f"no comment above {line}")

    def test_systemd_analyze_verifies_the_unit(self):
        tool = shutil.which("systemd-analyze")
        if not tool:
            self.skipTest("no systemd-analyze on this machine")
        with tempfile.TemporaryDirectory() as d:
            # ExecStart as installed names PREFIX/sbin/kairosd, which is under DESTDIR here
            text = read(INSTALLED["kairosd.service"])
            text = re.sub(r"^ExecStart=\S+", "ExecStart=" + INSTALLED["kairosd"], text, flags=re.M)
            unit = os.path.join(d, "kairosd.service")
            with open(unit, "w") as f:
                f.write(text)
            env = dict(os.environ, MANPATH=os.path.dirname(os.path.dirname(INSTALLED["kairosd.8"])))
            r = subprocess.run([tool, "verify", unit], capture_output=True, text=True, env=env,
                               timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stderr.strip(), "")  # no unknown key, no missing man page
            with open(unit, "a") as f:
                f.write("ProtectHom=yes\n")  # the check sees a mistake
            r = subprocess.run([tool, "verify", unit], capture_output=True, text=True, env=env,
                               timeout=60)
            self.assertIn("Unknown key", r.stderr)


class RunsFromTheDestdir(unittest.TestCase):
    def setUp(self):
        tenants = "  - name: team\n    memory: { 0: 64M }\n"
        self.d = Daemon(INSTALLED["kairosd"], tenants_yaml=tenants, gpus=1,
                        fake="gpu 0 GPU-fake-0000 85899345920\n").start()

    def tearDown(self):
        self.d.stop()
        shutil.rmtree(self.d.dir, ignore_errors=True)

    def test_kairos_run_is_refused_beyond_the_quota(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("KAIROS_")}
        env["LD_PRELOAD"] = " ".join(p for p in (ASAN_FIRST, FAKEDRV) if p)
        env["ASAN_OPTIONS"] = "detect_leaks=0:verify_asan_link_order=0"
        env.update(self.d.shim_env())
        self.assertNotIn("KAIROS_SHIM", env)  # kairos finds the installed shim itself
        r = subprocess.run([INSTALLED["kairos"], "run", "--tenant", "team", "--", FAKEAPP,
                            "-n", "40", "-s", str(2 * MiB), "-c", str(2 * MiB)],
                           capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        line = next(l for l in r.stdout.splitlines() if l.startswith("fakeapp: opens"))
        c = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}
        self.assertEqual(c["vidmem_bytes"], 64 * MiB)  # context + 31 blocks: the quota
        self.assertEqual(c["failed"], 9)
        self.assertIn("tenant team: refused", self.d.read_log())


if __name__ == "__main__":
    try:
        install()
        ok = unittest.main(argv=[sys.argv[0], "-v"], exit=False).result.wasSuccessful()
    finally:
        shutil.rmtree(DESTDIR, ignore_errors=True)
    sys.exit(0 if ok else 1)
