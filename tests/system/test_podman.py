#!/usr/bin/env python3
"""Containers get their tenant from `kairos cdi`'s specification, run by Debian's Podman
for real (issue 26): an image holding the fake driver and fakeapp (with the libraries
they link, nothing else), the NVIDIA device nodes played by stand-ins under
`kairos cdi --dev-root`, and a private kairosd. A container started with
--device kairos.dev/tenant=NAME loads the shim through the mounted /etc/ld.so.preload,
takes kairosd's socket from the mounted shim.conf, and is held to its tenant's quota
(the quota shown as the GPU's size). Playing the attacker: a user who asks for
another tenant's device is refused by kairosd (the specification grants nothing by
itself), and a container that clears KAIROS_TENANT is still metered.
Skipped where Podman cannot start a container (not root, no podman or runc, or a
plain container of the image fails to start: the machine's limits, not Kairos).
Usage: test_podman.py KAIROSD KAIROS SHIM FAKEDRV FAKEAPP"""
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kairos_proto as kp  # noqa: E402

KAIROSD, KAIROS, SHIM, FAKEDRV, FAKEAPP = (os.path.abspath(p) for p in sys.argv[1:6])
ASAN_FIRST = os.environ.get("KAIROS_PRELOAD_FIRST", "")
MiB = 1 << 20
MEMBER, STRANGER = 4242, 4343   # uids: a member of tenant A; a member of B only
SHIM_IN = "/usr/lib/kairos/libkairos.so"  # cdi_spec.h's CDI_SHIM_IN_CONTAINER
FAKEDRV_IN = "/opt/kairos-test/libkairos_fakedrv.so"
FAKEAPP_IN = "/opt/kairos-test/fakeapp"
# Debian's Podman with runc (crun refuses hosts whose cgroup v2 has controllers beside
# v1's); limits no higher than an unprivileged sandbox lets a runtime set
PODMAN = ["podman", "--runtime", "runc"]
RUN = ["run", "--rm", "--network", "none", "--ulimit", "nofile=1024:1024",
       "--ulimit", "nproc=1024:1024"]


def libraries(binary):
    """The files the dynamic loader maps for binary (ldd), the loader included."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    return re.findall(r"(?:=>\s+|^\s*)(/\S+)\s+\(0x", out, re.M)


def put(root, host_path, image_path):
    dest = os.path.join(root, image_path.lstrip("/"))
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    shutil.copy(host_path, dest)  # the file a symbolic link names, under the link's name
    os.chmod(dest, 0o755)


def image_tar(root, tar_path):
    """The image: fakeapp, the fake driver, and every library they and the shim link
    (the shim itself comes from the specification's mount)."""
    put(root, FAKEAPP, FAKEAPP_IN)
    put(root, FAKEDRV, FAKEDRV_IN)
    put(root, "/bin/cat", "/bin/cat")
    for binary in (FAKEAPP, FAKEDRV, SHIM, "/bin/cat"):
        for lib in libraries(binary):
            put(root, lib, lib)
    for d in ("etc", "tmp", "proc", "dev", "sys"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    with tarfile.open(tar_path, "w") as t:
        t.add(root, arcname=".")


def stand_in_nodes(root):
    """Character devices where the driver's would be: ROOT/dev/nvidia{ctl,-uvm,0}."""
    dev = os.path.join(root, "dev")
    os.makedirs(dev)
    for name, minor in (("nvidiactl", 255), ("nvidia-uvm", 254), ("nvidia0", 0)):
        os.mknod(os.path.join(dev, name), 0o666 | 0o020000, os.makedev(195, minor))


def podman_missing():
    """Why Podman cannot run this test here, or None."""
    if os.geteuid() != 0:
        return "needs root (Podman's rootful storage and mknod)"
    for tool in ("podman", "runc"):
        if not shutil.which(tool):
            return f"no {tool} (scripts/install-deps --test installs it)"
    return None


@unittest.skipIf(podman_missing(), podman_missing())
class PodmanTenants(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kairos-podman-")
        pid = os.getpid()
        cls.a, cls.b = f"pa{pid}", f"pb{pid}"  # unique: a node's own spec may have names
        cls.d = kp.Daemon(KAIROSD, gpus=1, tenants_yaml=(
            f"  - name: {cls.a}\n    memory: {{ 0: 64M }}\n    members: {{ users: [{MEMBER}] }}\n"
            f"  - name: {cls.b}\n    memory: {{ 0: 64M }}\n    members: {{ users: [{STRANGER}] }}\n"
        )).start()
        cls.d.wait_ready()
        os.chmod(os.path.dirname(cls.d.socket), 0o755)
        dev_root = os.path.join(cls.tmp, "driver")
        stand_in_nodes(dev_root)
        cls.spec = f"/var/run/cdi/kairos-test-{pid}.json"
        os.makedirs("/var/run/cdi", exist_ok=True)
        r = subprocess.run([KAIROS, "cdi", "--socket", cls.d.socket, "--shim", SHIM,
                            "--dev-root", dev_root, "--preload-file",
                            os.path.join(cls.tmp, "cdi", "ld.so.preload"), "--output", cls.spec,
                            "-t", cls.a, "-t", cls.b], capture_output=True, text=True, timeout=30)
        if r.returncode:
            cls.tearDownClass()
            raise AssertionError(f"kairos cdi: {r.stderr}")
        cls.image = f"localhost/kairos-test-{pid}:1"
        tar = os.path.join(cls.tmp, "image.tar")
        image_tar(os.path.join(cls.tmp, "rootfs"), tar)
        r = subprocess.run(PODMAN + ["import", tar, cls.image], capture_output=True, text=True,
                           timeout=120)
        if r.returncode:
            cls.tearDownClass()
            raise AssertionError(f"podman import: {r.stderr}")
        r = subprocess.run(PODMAN + RUN + [cls.image, "/bin/cat", "/dev/null"],
                           capture_output=True, text=True, timeout=120)
        if r.returncode:  # the machine, not Kairos: no kairos device was asked for
            cls.tearDownClass()
            raise unittest.SkipTest(f"Podman cannot start a container here: {r.stderr[-300:]}")

    @classmethod
    def tearDownClass(cls):
        if os.path.exists(getattr(cls, "spec", "")):
            os.unlink(cls.spec)
        if getattr(cls, "image", None):
            subprocess.run(PODMAN + ["rmi", "-f", cls.image], capture_output=True, timeout=120)
        cls.d.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def podman(self, tenant, user, *cmd, env=()):
        args = PODMAN + RUN + ["--user", str(user), "--device", f"kairos.dev/tenant={tenant}",
                               "--env", "ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0"]
        for e in env:
            args += ["--env", e]
        return subprocess.run(args + [self.image, *cmd], capture_output=True, text=True,
                              timeout=120)

    def fakeapp(self, tenant, user, *args, env=()):
        preload = " ".join(p for p in (ASAN_FIRST, SHIM_IN, FAKEDRV_IN) if p)
        return self.podman(tenant, user, FAKEAPP_IN, "-n", "100", "-s", str(MiB), "-c",
                           str(MiB), *args, env=(f"LD_PRELOAD={preload}", *env))

    def ledger(self, tenant):
        """(held, refusals) of tenant on GPU 0, as kairosd counts them."""
        r = subprocess.run([KAIROS, "ps", "--json", "--socket", self.d.socket],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        t = {t["name"]: t for t in json.loads(r.stdout)["tenants"]}[tenant]
        return t["gpus"][0]["held"], t["gpus"][0]["refusals"]

    def test_the_specification_loads_the_shim_with_the_node_settings(self):
        r = self.podman(self.a, MEMBER, "/bin/cat", "/proc/self/maps", "/proc/self/environ",
                        "/etc/ld.so.preload", "/etc/kairos/shim.conf")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(SHIM_IN, r.stdout)                      # mapped, by ld.so.preload
        self.assertIn(f"KAIROS_TENANT={self.a}\0", r.stdout)
        self.assertIn(f"socket: {self.d.socket}\n", r.stdout)
        self.assertIn("register: always\n", r.stdout)

    def test_a_container_is_held_to_its_tenant_quota(self):
        r = self.fakeapp(self.a, MEMBER)
        self.assertEqual(r.returncode, 0, r.stderr)
        counts = dict(re.findall(r"(\w+)=(\d+)", r.stdout.splitlines()[-1]))
        self.assertEqual(int(counts["vidmem_bytes"]), 64 * MiB)  # context + 63, not 101 MiB
        self.assertGreater(int(counts["failed"]), 0)
        self.assertEqual(int(counts["fb_total_kib"]), 64 * 1024)  # the quota as the GPU
        self.assertGreater(self.ledger(self.a)[1], 0)             # kairosd refused the rest

    def test_another_tenants_device_is_refused_by_kairosd(self):
        before = self.ledger(self.a)
        r = self.fakeapp(self.a, STRANGER)  # the spec names A; the uid is B's member
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn(f"GPU access refused: tenant '{self.a}' does not admit uid {STRANGER}",
                      r.stderr)
        self.assertNotIn("vidmem_bytes", r.stdout)  # it never opened the GPU
        self.assertEqual(self.ledger(self.a), before)

    def test_clearing_the_tenant_does_not_escape_the_meter(self):
        r = self.fakeapp(self.a, MEMBER, env=("KAIROS_TENANT=",))
        self.assertEqual(r.returncode, 0, r.stderr)
        # registered all the same (register: always) and placed by kairosd in the one
        # tenant whose members it is: held to that quota
        counts = dict(re.findall(r"(\w+)=(\d+)", r.stdout.splitlines()[-1]))
        self.assertEqual(int(counts["vidmem_bytes"]), 64 * MiB)
        self.assertEqual(int(counts["fb_total_kib"]), 64 * 1024)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
