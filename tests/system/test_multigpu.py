#!/usr/bin/env python3
"""Two or more GPUs with no GPU: kairosd with two GPUs, `kairos run`, the real
libkairos.so and the fake driver with two fake GPUs (FAKEDRV_GPUS=2), driven by
fakeapp, which opens CUDA device N the way CUDA does (through CUDA_VISIBLE_DEVICES,
the RM device instance staying the physical one).

Per-GPU quotas and the memory view: allocations are charged to the GPU whose
device instance they hang under, and the program sees that GPU's quota as its
size, whichever number CUDA_VISIBLE_DEVICES gives the GPU; the time policy of a
GPU pauses the channels on that physical GPU.
Shares per GPU: a tenant with a share on GPU 0 only (`kairos run --gpus 0 --share`)
and one with a share on GPU 1 only (the configuration) next to one with shares
on both: each GPU's windows are in the ratio of its own shares, and the tenant on
both GPUs gets its windows at the same phase on each (sched_tenant_set_spans).
kairos ps and kairos top with two GPUs: a row per GPU with that GPU's figures.
Usage: test_multigpu.py KAIROSD KAIROS SHIM FAKEDRV FAKEAPP
       test_multigpu.py --policies SOCKET TENANT UNTIL   (a tenant's process: prints
       the last TIME_POLICY received per GPU before time.monotonic() reached UNTIL, as
       JSON, after staying one second more so the others see it present)"""
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kairos_proto as kp  # noqa: E402
from kairos_proto import Daemon  # noqa: E402
from harness import pass_time  # noqa: E402
from harness import reap  # noqa: E402


def policies_child(sock_path, tenant, until):
    """Registers as a process of tenant, keeps the last TIME_POLICY per GPU received
    before until (CLOCK_MONOTONIC, the same for every process), stays a second more,
    prints them. Reads the stream itself: several policies may come in one read."""
    c = kp.Client(sock_path)
    c.hello(tenant)
    c.sock.settimeout(0.1)
    last, buf = {}, b""
    while time.monotonic() < until:
        try:
            data = c.sock.recv(65536)
        except socket.timeout:
            continue
        if not data:
            break
        buf += data
        while len(buf) >= kp.HDR.size:
            _, _, type_, size, _ = kp.HDR.unpack_from(buf)
            if len(buf) < kp.HDR.size + size:
                break
            body, buf = buf[kp.HDR.size:kp.HDR.size + size], buf[kp.HDR.size + size:]
            if type_ == kp.TIME_POLICY:
                p = kp.time_policy(body)
                last[p["gpu"]] = p
    pass_time(1.0, "the member stays while the test lists the tenants")
    print(json.dumps(last))
    return 0


if len(sys.argv) == 5 and sys.argv[1] == "--policies":
    sys.exit(policies_child(sys.argv[2], sys.argv[3], float(sys.argv[4])))

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
                   "  - name: gpu1only\n    memory: { 0: 0, 1: 32M }\n"
                   "  - name: paced1\n    memory: { 0: 64M, 1: 64M }\n"
                   "    compute: { 1: { limit: 10% } }\n")
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

    def test_instances_in_order_of_first_use_still_charge_the_right_gpu(self):
        """A driver without persistence mode that initialised GPU 1 first gives it
        device instance 0 (FAKEDRV_INSTANCES=1,0). The shim learns from the driver's
        own answers (GET_PROBED_IDS, GET_ID_INFO_V2) which GPU an instance is, so the
        memory is still charged, and the quota shown, by the GPU's place in PCI
        order (NVML's index)."""
        c = self.run_tenant("team", "-d", "0", CUDA_VISIBLE_DEVICES="1", FAKEDRV_INSTANCES="1,0")
        self.assertEqual(c["instance"], 0)
        self.assert_on_gpu(c, 1, 16)
        c = self.run_tenant("team", "-d", "0", FAKEDRV_INSTANCES="1,0")
        self.assertEqual(c["instance"], 1)
        self.assert_on_gpu(c, 0, 64)

    def test_forged_identity_answers_change_nothing(self):
        """The attacker: while asking GET_ID_INFO_V2 2000 times, a second thread of
        the program keeps writing into the answer GPU 1's instance paired with GPU
        0's gpuId, to have its GPU 1 memory charged to GPU 0's larger quota. The
        shim reads only its own copy of the driver's answer: still GPU 1, 16 MiB."""
        c = self.run_tenant("team", "-d", "0", "-F", CUDA_VISIBLE_DEVICES="1",
                            FAKEDRV_INSTANCES="1,0")
        self.assertEqual(c["instance"], 0)
        self.assert_on_gpu(c, 1, 16)

    def test_kairos_run_gpus_1_the_program_sees_device_0_as_gpu_1(self):
        c = self.run_tenant("gpu1only", "-d", "0", run_args=("--gpus", "1"))
        self.assert_on_gpu(c, 1, 32)

    def kairos(self, *args):
        r = subprocess.run([KAIROS, *args, "--socket", self.d.socket], capture_output=True,
                           text=True, env=self.env(), timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def test_ps_and_top_show_each_gpus_row(self):
        """Two processes of team hold 24 MiB on GPU 0 and 16 MiB on GPU 1 (its quota
        there); kairos ps and kairos top show one row per GPU with that GPU's
        figures (the tenant's pids and process count are the tenant's, not the
        GPU's)."""
        procs = []
        for dev, n in (("0", "11"), ("1", "40")):
            procs.append(subprocess.Popen(
                [KAIROS, "run", "--socket", self.d.socket, "--tenant", "team", "--", FAKEAPP,
                 "-d", dev, "-n", n, "-s", str(PAGE), "-c", str(PAGE), "-w", "3"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env()))
        try:
            for p in procs:
                line = p.stdout.readline()
                self.assertTrue(line.startswith("fakeapp: holding"), line)
            pid0, pid1 = procs[0].pid, procs[1].pid  # kairos run execs the program
            ps = self.kairos("ps")
            # (SHARE, TARGET, 1MIN are "-": team has no compute policy)
            m = re.search(r"\nteam\s+0\s+24\.0 MiB/64\.0 MiB\s+\d+(?:\s+-)*\s+(\d+),(\d+)\n"
                          r"\s+1\s+16\.0 MiB/16\.0 MiB\s+[1-9]\d*(?:\s+-)*\n", ps)
            self.assertIsNotNone(m, ps)
            self.assertEqual(sorted(int(x) for x in m.groups()), sorted((pid0, pid1)))
            self.assertRegex(ps, r"\ngpu1only\s+0\s+0 B/0 B\s+\d+(?:\s+-)+\n\s+1\s+0 B/32\.0 MiB\s+")
            top = self.kairos("top", "--once", "--wide")
            gpu0, gpu1 = top.split("\nGPU 0\n")[1].split("\nGPU 1\n")
            # PROCS counts the tenant's processes, whichever GPU they use
            self.assertRegex(gpu0, r"\n  team(\s+-){10}\s+24\.0 MiB/64\.0 MiB\s+2\n")
            self.assertRegex(gpu1, r"\n  team(\s+-){10}\s+16\.0 MiB/16\.0 MiB\s+2\n")
            self.assertRegex(gpu1, r"\n  gpu1only(\s+-){10}\s+0 B/32\.0 MiB\s+0\n")
        finally:
            for p in procs:
                p.communicate(timeout=30)

    def controls(self, *args, **extra):
        """fakeapp of tenant paced1 holding its memory 0.6 s; the time controls the
        fake driver received from its shim, as (kind, fields) pairs."""
        # a name of its own: numbered by the directory's entries, a log could be reused when
        # a file of kairosd's there (its state being saved) came and went between two calls
        fd, log = tempfile.mkstemp(prefix="ctl-", suffix=".log", dir=self.d.dir)
        os.close(fd)
        c = self.run_tenant("paced1", *args, "-n", "2", "-w", "0.6", FAKEDRV_CTL_LOG=log,
                            **extra)
        with open(log) as f:
            lines = f.read().splitlines()
        return c, [(l.split()[0], dict(re.findall(r"(\w+)=(\S+)", l))) for l in lines]

    def test_time_policy_follows_the_physical_gpu(self):
        """paced1 has a 10 % limit on GPU 1 only. Its program's device 0 is paused
        (windows) when CUDA_VISIBLE_DEVICES=1 makes it physical GPU 1, and never when
        it is GPU 0."""
        c, ctl = self.controls("-d", "0", CUDA_VISIBLE_DEVICES="1")
        self.assertEqual(c["device"], 1)
        pauses = [f for k, f in ctl if k == "disable" and f["disable"] == "1"]
        self.assertGreater(len(pauses), 0, ctl)
        self.assertTrue(all(f["status"] == "0" for k, f in ctl), ctl)
        c, ctl = self.controls("-d", "0")
        self.assertEqual(c["device"], 0)
        self.assertEqual([f for k, f in ctl if k == "disable"], [], ctl)

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


FAKE_GPUS = "gpu 0 GPU-fake-0000 85899345920\ngpu 1 GPU-fake-0001 85899345920\n"


class SharesPerGpu(unittest.TestCase):
    """GPU 0: both 40 %, solo0 60 % (set at run time by `kairos run --gpus 0 --share
    60%`); GPU 1: solo1 60 % (the configuration, declared before "both", so that slot
    order alone would put its window first on GPU 1), both 20 %."""

    def setUp(self):
        tenants = ("  - name: solo1\n    memory: { 1: 1G }\n    compute: { 1: { share: 60% } }\n"
                   "  - name: both\n    memory: { 0: 1G, 1: 1G }\n"
                   "    compute: { 0: { share: 40% }, 1: { share: 20% } }\n")
        self.d = Daemon(KAIROSD, tenants_yaml=tenants, gpus=2, fake=FAKE_GPUS,
                        extra="time_mode: windows\n").start()
        self.procs = []

    def tearDown(self):
        reap(self.procs)
        self.d.stop()

    def start(self, tenant, *run_args, until):
        """A process of tenant (through `kairos run`, which may set its policy)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("KAIROS_")}
        env.update(LD_PRELOAD=ASAN_FIRST, KAIROS_SHIM=SHIM,
                   ASAN_OPTIONS="detect_leaks=0:verify_asan_link_order=0")
        env.update(self.d.shim_env())
        cmd = [sys.executable, os.path.abspath(__file__), "--policies", self.d.socket, tenant,
               repr(until)]
        p = subprocess.Popen([KAIROS, "run", "--socket", self.d.socket, "--tenant", tenant,
                              *run_args, "--", *cmd],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.procs.append(p)
        return p

    def last_policies(self, proc):
        out, err = proc.communicate(timeout=30)
        self.assertEqual(proc.returncode, 0, err)
        return {int(g): p for g, p in json.loads(out.splitlines()[-1]).items()}

    def window(self, p):
        return (p["period_us"], p["phase_us"], p["duty_us"])

    def test_each_gpu_follows_its_own_shares_and_both_is_aligned(self):
        until = time.monotonic() + 4.0  # the policies in force then, all three present
        procs = {"solo0": self.start("solo0", "--gpus", "0", "--share", "60%", "--mem", "1G",
                                     until=until)}
        pass_time(0.3, "solo0 has its GPU alone a moment before the others join")
        procs["solo1"] = self.start("solo1", until=until)
        procs["both"] = self.start("both", until=until)
        pass_time(max(0, until + 0.3 - time.monotonic()), "past until: the policies then")
        r = subprocess.run([KAIROS, "ps", "--json", "--socket", self.d.socket],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        ps = {t["name"]: t["gpus"] for t in json.loads(r.stdout)["tenants"]}
        top = subprocess.run([KAIROS, "top", "--once", "--wide", "--socket", self.d.socket],
                             capture_output=True, text=True, timeout=30).stdout
        got = {name: self.last_policies(p) for name, p in procs.items()}
        self.assertEqual(sorted(got["solo0"]), [0], got)   # a policy on its GPU only
        self.assertEqual(sorted(got["solo1"]), [1], got)
        self.assertEqual(sorted(got["both"]), [0, 1], got)
        # GPU 0: 40 : 60; GPU 1: 20 : 60 stretched to fill the period (25 : 75)
        self.assertEqual(self.window(got["both"][0]), (100000, 0, 40000))
        self.assertEqual(self.window(got["solo0"][0]), (100000, 40000, 60000))
        self.assertEqual(self.window(got["both"][1]), (100000, 0, 25000))
        self.assertEqual(self.window(got["solo1"][1]), (100000, 25000, 75000))
        # the same clock on both GPUs: the windows of "both" start together
        self.assertEqual(got["both"][0]["epoch_ns"], got["both"][1]["epoch_ns"])
        # kairos ps and top: each GPU's row with that GPU's share and window
        both = [g.get("compute") for g in ps["both"]]
        self.assertEqual([(c["share"], c["windowed"]) for c in both],
                         [(0.4, {"duty_us": 40000, "period_us": 100000}),
                          (0.2, {"duty_us": 25000, "period_us": 100000})])
        self.assertIsNone(ps["solo0"][1].get("compute"))
        self.assertIsNone(ps["solo1"][0].get("compute"))
        gpu0, gpu1 = top.split("\nGPU 0\n")[1].split("\nGPU 1\n")
        self.assertRegex(gpu0, r"\n  both\s+\S+\s+\S+\s+\S+\s+40\.0%\s+none\s+normal\s+40\.0/100ms")
        self.assertRegex(gpu1, r"\n  both\s+\S+\s+\S+\s+\S+\s+20\.0%\s+none\s+normal\s+25\.0/100ms")
        self.assertRegex(gpu0, r"\n  solo0\s+\S+\s+\S+\s+\S+\s+60\.0%\s+none\s+normal\s+60\.0/100ms")
        self.assertNotIn("solo0", gpu1)


class Numbering(unittest.TestCase):
    """Without persistence mode the driver numbers GPUs in the order they are first
    opened (docs/multi-gpu.md): kairosd warns at start, naming each such GPU of a
    node with several, and not on a node with one."""

    def start(self, fake, gpus=2):
        d = Daemon(KAIROSD, gpus=gpus, fake=fake).start()
        d.stop()
        return [l for l in d.read_log().splitlines() if "persistence mode is off" in l]

    def test_warns_about_each_gpu_without_persistence(self):
        warned = self.start(FAKE_GPUS + "persistence 0 1\npersistence 1 0\n")
        self.assertEqual(len(warned), 1, warned)
        self.assertIn("GPU 1: persistence mode is off", warned[0])
        self.assertIn("nvidia-smi -pm 1", warned[0])
        self.assertEqual(len(self.start(FAKE_GPUS + "persistence 0 0\npersistence 1 0\n")), 2)

    def test_silent_with_persistence_unknown_or_one_gpu(self):
        self.assertEqual(self.start(FAKE_GPUS + "persistence 0 1\npersistence 1 1\n"), [])
        self.assertEqual(self.start(FAKE_GPUS), [])  # the backend cannot tell
        self.assertEqual(self.start("gpu 0 GPU-fake-0000 85899345920\npersistence 0 0\n",
                                    gpus=1), [])


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
