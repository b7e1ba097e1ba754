#!/usr/bin/env python3
"""The Debian package (scripts/build-deb), installed on this machine with dpkg -i and
exercised there: the postinst made /run/kairos and /var/lib/kairos (tmpfiles.d);
kairosd started exactly as its unit's ExecStart says (no systemd as PID 1 here:
the test plays the service manager, NOTIFY_SOCKET included) with a fake GPU
(KAIROS_FAKE_GPU), and the installed `kairos run --mem 64M` with nothing else set
runs a fake-driver program that is refused beyond 64 MiB; kairos ps reads the
daemon; SIGTERM stops it; systemd-analyze verifies the installed unit; /etc/kairos/shim.conf
is a root-owned conffile. Without a
daemon, the README's standalone recipe (KAIROS_MEM=... LD_PRELOAD="$(kairos shim)")
caps a process as written, and the CLI names the service to start. The package is purged afterwards unless it was installed
before (its prerm runs kairosd --quit-domains). Needs root (dpkg); run by scripts/test after the meson builds.
The Slurm plugin's package installs beside it: kairos_spank.so in Slurm's plugin
directory, exporting what slurmstepd looks up, with its manual page.
Usage: test_package.py KAIROS_DEB FAKEDRV FAKEAPP KAIROS_SLURM_DEB"""
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import datagram_socket, reap  # noqa: E402

DEB, FAKEDRV, FAKEAPP, SLURM_DEB = (os.path.abspath(p) for p in sys.argv[1:5])
UNIT = "/lib/systemd/system/kairosd.service"
SOCKET = "/run/kairos/kairosd.sock"
MiB = 1 << 20


def installed():
    r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", "kairos"], capture_output=True,
                       text=True)
    return "install ok installed" in r.stdout


def unit_exec_start():
    with open(UNIT) as f:
        (line,) = [l for l in f.read().splitlines() if l.startswith("ExecStart=")]
    return shlex.split(line[len("ExecStart="):])


def service_env(**extra):
    """A service's environment: systemd gives no more than this (and the unit's
    own settings, of which kairosd.service has none)."""
    return {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "LANG": "C.UTF-8", **extra}


@unittest.skipUnless(os.geteuid() == 0, "dpkg -i needs root")
class Package(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.was_installed = installed()
        r = subprocess.run(["dpkg", "-i", DEB, SLURM_DEB], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr

    @classmethod
    def tearDownClass(cls):
        if not cls.was_installed:
            r = subprocess.run(["dpkg", "--purge", "kairos-slurm", "kairos"],
                               capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stdout + r.stderr
            # the prerm ended what kairosd left for space mode's domains (none here)
            assert "fault domain's MPS control daemon" in r.stdout, r.stdout + r.stderr
            assert not os.path.exists("/usr/bin/kairos")
            assert not os.path.exists(UNIT)
            assert not os.path.exists("/var/lib/kairos")  # purge takes the state too
            assert not os.path.exists("/etc/kairos/shim.conf")  # and the conffile

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kairos-package-")
        self.fake = os.path.join(self.dir, "gpus.txt")
        with open(self.fake, "w") as f:
            f.write("gpu 0 GPU-fake-0000 85899345920\n")
        self.notify_path = os.path.join(self.dir, "notify")
        self.notify = datagram_socket(self.notify_path, timeout=15)
        self.log = open(os.path.join(self.dir, "kairosd.log"), "w+")
        self.proc = None

    def tearDown(self):
        if self.proc:
            reap([self.proc])
        self.notify.close()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def start_as_the_unit(self):
        argv = unit_exec_start()
        self.assertEqual(argv, ["/usr/sbin/kairosd"])
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=self.log, cwd="/",
                                     env=service_env(NOTIFY_SOCKET=self.notify_path,
                                                     KAIROS_FAKE_GPU=self.fake))
        while True:  # Type=notify: started when it says READY=1
            msg = self.notify.recv(4096).decode()
            if "READY=1" in msg:
                return

    def read_log(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def test_systemd_analyze_verifies_the_installed_unit(self):
        tool = shutil.which("systemd-analyze")
        if not tool:
            self.skipTest("no systemd-analyze on this machine")
        r = subprocess.run([tool, "verify", UNIT], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr.strip(), "")  # ExecStart exists, the man pages are installed

    def test_the_shim_settings_are_a_root_owned_conffile(self):
        st = os.stat("/etc/kairos/shim.conf")
        self.assertEqual((st.st_uid, st.st_mode & 0o7777), (0, 0o644))
        with open("/etc/kairos/shim.conf") as f:
            self.assertIn("socket: /run/kairos/kairosd.sock", f.read())
        r = subprocess.run(["dpkg-query", "-W", "-f=${Conffiles}", "kairos"],
                           capture_output=True, text=True, timeout=30)
        self.assertIn("/etc/kairos/shim.conf", r.stdout)  # an edit survives upgrades

    def test_the_slurm_plugin_is_in_slurms_plugin_directory(self):
        arch = subprocess.run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"],
                              capture_output=True, text=True, timeout=30).stdout.strip()
        plugin = f"/usr/lib/{arch}/slurm-wlm/kairos_spank.so"  # docs/slurm.md names it
        r = subprocess.run(["nm", "-D", "--defined-only", plugin], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        symbols = {line.split()[-1] for line in r.stdout.splitlines()}
        for wanted in ("plugin_name", "plugin_version", "slurm_spank_init",
                       "slurm_spank_task_init_privileged"):
            self.assertIn(wanted, symbols)
        self.assertTrue(os.path.exists("/usr/share/man/man8/kairos_spank.8.gz"))

    def test_the_postinst_made_the_directories(self):
        self.assertEqual(os.stat("/run/kairos").st_mode & 0o7777, 0o755)
        self.assertEqual(os.stat("/var/lib/kairos").st_mode & 0o7777, 0o700)

    def test_kairosd_as_the_unit_starts_it_and_kairos_run_is_refused_beyond_its_quota(self):
        self.start_as_the_unit()
        env = {k: v for k, v in os.environ.items() if not k.startswith("KAIROS_")}
        env["LD_PRELOAD"] = FAKEDRV  # the fake NVIDIA driver; kairos adds its shim first
        r = subprocess.run(["/usr/bin/kairos", "run", "--mem", "64M", "--", FAKEAPP,
                            "-n", "40", "-s", str(2 * MiB), "-c", str(2 * MiB)],
                           capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr + self.read_log())
        line = next(l for l in r.stdout.splitlines() if l.startswith("fakeapp: opens"))
        c = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}
        self.assertEqual(c["vidmem_bytes"], 64 * MiB)  # context + 31 blocks of 2 MiB
        self.assertEqual(c["failed"], 9)
        self.assertRegex(self.read_log(), r"tenant run-\d+: refused 2\.00 MiB on GPU 0")
        r = subprocess.run(["/usr/bin/kairos", "ps", "--json"], capture_output=True, text=True,
                           env=env, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("tenants", json.loads(r.stdout))
        self.proc.send_signal(signal.SIGTERM)
        self.assertIn("STOPPING=1", self.notify.recv(4096).decode())
        self.assertEqual(self.proc.wait(15), 0, self.read_log())

    def test_the_standalone_recipe_caps_one_process_as_written(self):
        # README: KAIROS_MEM=8G LD_PRELOAD="$(kairos shim)" CMD; the fake driver comes after
        # the shim, as the real one would be below it
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("KAIROS_") and k != "LD_PRELOAD"}
        env.update(PATH="/usr/bin:/bin", FAKEDRV=FAKEDRV, FAKEAPP=FAKEAPP)
        r = subprocess.run(["sh", "-c", 'KAIROS_MEM=64M LD_PRELOAD="$(kairos shim) $FAKEDRV" '
                            f'"$FAKEAPP" -n 40 -s {2 * MiB} -c {2 * MiB}'],
                           capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        line = next(l for l in r.stdout.splitlines() if l.startswith("fakeapp: opens"))
        c = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}
        self.assertEqual((c["vidmem_bytes"], c["failed"]), (64 * MiB, 9))
        shim = subprocess.run(["/usr/bin/kairos", "shim"], capture_output=True, text=True,
                              env=env, timeout=30).stdout.strip()
        self.assertTrue(shim.startswith("/usr/lib/") and os.path.isfile(shim), shim)

    def test_no_daemon_names_the_service_to_start(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("KAIROS_")}
        r = subprocess.run(["/usr/bin/kairos", "ps"], capture_output=True, text=True, env=env,
                           timeout=30)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("kairosd is not running", r.stderr)
        self.assertIn("sudo systemctl start kairosd", r.stderr)
        self.assertIn("journalctl -u kairosd", r.stderr)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
