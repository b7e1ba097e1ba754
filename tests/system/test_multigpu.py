#!/usr/bin/env python3
"""Two or more GPUs with no GPU: kairosd with two GPUs, `kairos run`, the real
libkairos.so and the fake driver with two fake GPUs (FAKEDRV_GPUS=2), driven by
fakeapp, which opens CUDA device N the way CUDA does (through CUDA_VISIBLE_DEVICES,
the RM device instance staying the physical one).

Per-GPU quotas and the memory view: allocations are charged to the GPU whose
device instance they hang under, and the program sees that GPU's quota as its
size, whichever number CUDA_VISIBLE_DEVICES gives the GPU.
Usage: test_multigpu.py KAIROSD KAIROS SHIM FAKEDRV FAKEAPP"""
import json
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kairos_proto import Daemon  # noqa: E402

KAIROSD, KAIROS, SHIM, FAKEDRV, FAKEAPP = sys.argv[1:6]
ASAN_FIRST = os.environ.get("KAIROS_PRELOAD_FIRST", "")
MiB = 1 << 20
PAGE = 2 * MiB
FB_MIB = 1024  # each fake GPU's memory


def counts(text):
    line = next(l for l in text.splitlines() if l.startswith("fakeapp: opens"))
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}


class PerGpuQuotas(unittest.TestCase):
    """A tenant with 64 MiB on GPU 0 and 16 MiB on GPU 1."""

    @classmethod
    def setUpClass(cls):
        tenants = ("  - name: team\n    memory: { 0: 64M, 1: 16M }\n"
                   "  - name: gpu1only\n    memory: { 0: 0, 1: 32M }\n")
        cls.d = Daemon(KAIROSD, tenants_yaml=tenants, gpus=2).start()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def env(self, **extra):
        e = {k: v for k, v in os.environ.items()
             if not k.startswith("KAIROS_") and not k.startswith("CUDA_")}
        e["LD_PRELOAD"] = " ".join(p for p in (ASAN_FIRST, SHIM, FAKEDRV) if p)
        e["ASAN_OPTIONS"] = "detect_leaks=0:verify_asan_link_order=0"
        e["KAIROS_SHIM"] = SHIM
        e["FAKEDRV_GPUS"] = "2"
        e["FAKEDRV_FB_MIB"] = str(FB_MIB)
        e.update(self.d.shim_env())
        e.update(extra)
        return e

    def run_tenant(self, tenant, *args, run_args=(), **extra):
        """fakeapp under `kairos run --tenant`; a few allocations beyond any quota."""
        r = subprocess.run([KAIROS, "run", "--socket", self.d.socket, "--tenant", tenant,
                            *run_args, "--", FAKEAPP, "-n", "40", "-s", str(PAGE), "-c",
                            str(PAGE), *args],
                           capture_output=True, text=True, env=self.env(**extra), timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        return counts(r.stdout)

    def refusals(self, tenant):
        r = subprocess.run([KAIROS, "ps", "--json", "--socket", self.d.socket],
                           capture_output=True, text=True, env=self.env(), timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        t = next(t for t in json.loads(r.stdout)["tenants"] if t["name"] == tenant)
        return {g["index"]: g["refusals"] for g in t["gpus"]}

    def assert_on_gpu(self, c, gpu, quota_mib):
        """fakeapp ran on physical GPU gpu, held exactly its quota there, and saw
        the quota as the GPU's size."""
        self.assertEqual(c["device"], gpu)
        self.assertEqual(c["vidmem_bytes"], quota_mib * MiB)
        self.assertGreater(c["failed"], 0)
        self.assertEqual(c["fb_total_kib"], quota_mib * 1024)
        self.assertEqual(c["fb_free_after_kib"], 0)

    def test_each_gpu_charged_and_shown_its_own_quota(self):
        before = self.refusals("team")
        self.assert_on_gpu(self.run_tenant("team", "-d", "0"), 0, 64)
        self.assert_on_gpu(self.run_tenant("team", "-d", "1"), 1, 16)
        after = self.refusals("team")
        for g in (0, 1):  # each GPU's refusals counted on that GPU
            self.assertGreater(after[g], before.get(g, 0), (before, after))

    def test_visible_devices_1_cuda_device_0_is_physical_gpu_1(self):
        c = self.run_tenant("team", "-d", "0", CUDA_VISIBLE_DEVICES="1")
        self.assert_on_gpu(c, 1, 16)

    def test_visible_devices_1_0_reorders_the_numbers_not_the_quotas(self):
        self.assert_on_gpu(self.run_tenant("team", "-d", "0", CUDA_VISIBLE_DEVICES="1,0"), 1, 16)
        self.assert_on_gpu(self.run_tenant("team", "-d", "1", CUDA_VISIBLE_DEVICES="1,0"), 0, 64)

    def test_kairos_run_gpus_1_the_program_sees_device_0_as_gpu_1(self):
        c = self.run_tenant("gpu1only", "-d", "0", run_args=("--gpus", "1"))
        self.assert_on_gpu(c, 1, 32)

    def test_a_tenant_that_unhides_gpu_0_gets_nothing_there(self):
        """The attacker: a tenant confined to GPU 1 rewrites CUDA_VISIBLE_DEVICES
        (its own environment) to reach GPU 0; its quota there is 0, so not one
        byte is allocated and the memory view shows it a GPU of size 0."""
        r = subprocess.run([KAIROS, "run", "--socket", self.d.socket, "--tenant", "gpu1only",
                            "--gpus", "1", "--", "env", "CUDA_VISIBLE_DEVICES=0", FAKEAPP,
                            "-n", "8", "-s", str(PAGE), "-c", str(PAGE)],
                           capture_output=True, text=True, env=self.env(), timeout=60)
        out = r.stdout + r.stderr
        if r.returncode == 0:
            c = counts(r.stdout)
            self.assertEqual(c["device"], 0)
            self.assertEqual(c["vidmem_bytes"], 0, out)
            self.assertEqual(c["fb_total_kib"], 0, out)
        else:  # refused at the context's memory: fakeapp stops there
            self.assertIn("context memory", out)
        self.assertGreater(self.refusals("gpu1only").get(0, 0), 0)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
