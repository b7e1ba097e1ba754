#!/usr/bin/env python3
"""The audit of kairosd against the fake GPU backend, without root or GPU: per-tenant
sums (4 x 0.9 GiB in a 1 GiB tenant), process lists beyond any fixed size, openers
of the device nodes found through /proc (a fake /dev), memory.used reconciled with
its holder named, members that just left not taken for intruders, kill by policy
with exemptions (and root's monitoring tools never), the /proc scan without a GPU
backend, and kairosd's NVML backend on a stand-in libnvidia-ml.so.1 (tests/fakenvml).
Usage: test_audit.py KAIROSD_BINARY FAKE_LIBNVIDIA_ML"""
import os
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kairos_proto as kp  # noqa: E402
from harness import hold_still, pass_time, reap, wait_for  # noqa: E402

KAIROSD, FAKE_NVML = sys.argv[1], sys.argv[2]
GiB = kp.GiB
FAKE = "gpu 0 GPU-fake-0000 85899345920\ngpu 1 GPU-fake-0001 85899345920\n"
NO_SUCH_PID = 4194304 + 1000  # above any pid_max: never a real process

# A process that names itself COMM, opens DEVFILE and registers with kairosd as a
# member of TENANT ("-": not that); "leave" on stdin closes its connection.
CHILD = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
import kairos_proto as kp
sock, tenant, dev, comm = sys.argv[2:6]
if comm != "-":
    with open("/proc/self/comm", "w") as f:
        f.write(comm)
c = None
if tenant != "-":  # registered before it opens the GPU, as the shim does
    c = kp.Client(sock)
    c.hello(tenant)
if dev != "-":
    fd = os.open(dev, os.O_RDONLY)
os.write(1, b"ready\n")
for line in sys.stdin:
    if line.strip() == "leave" and c:
        c.close()
        os.write(1, b"left\n")
"""


class AuditCase(unittest.TestCase):
    tenants = "  - name: small\n    memory: { 0: 1G }\n"
    extra = "audit: { interval_ms: 100 }\n"

    def setUp(self):
        self.d = kp.Daemon(KAIROSD, self.tenants, fake=FAKE, extra=self.extra)
        self.dev = os.path.join(self.d.dir, "dev")
        os.mkdir(self.dev)
        for node in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
            open(os.path.join(self.dev, node), "w").close()
        self.fake = FAKE + f"devdir {self.dev}\n"
        self.d.write_fake(self.fake)
        self.d.start()
        self.procs = []

    def tearDown(self):
        reap(self.procs)
        self.d.stop()
        self.assertNotIn("runtime error", self.log())
        self.assertNotIn("Sanitizer", self.log())

    def spawn(self, tenant="-", dev="-", comm="-", user=None):
        pre = []
        if user is not None:
            pre = ["setpriv", f"--reuid={user}", "--regid=nogroup", "--clear-groups"]
        p = subprocess.Popen(pre + [sys.executable, "-c", CHILD, os.path.dirname(kp.__file__),
                                    self.d.socket, tenant, dev, comm],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.procs.append(p)
        self.assertEqual(p.stdout.readline(), b"ready\n")
        return p

    def member(self, tenant, dev="-"):
        """A process registered with kairosd as a member of tenant, until killed."""
        return self.spawn(tenant, dev)

    def node(self, g):
        return os.path.join(self.dev, f"nvidia{g}")

    def stranger(self, name="sleep"):
        """A process that never registered."""
        p = subprocess.Popen(["sleep", "60"] if name == "sleep" else
                             ["bash", "-c", f"exec -a {name} sleep 60"])
        self.procs.append(p)
        return p

    def log(self):
        return self.d.read_log()


class TenantSums(AuditCase):
    def test_four_processes_of_0_9_gib_in_a_1_gib_tenant_reported(self):
        ms = [self.member("small") for _ in range(4)]
        used = int(0.9 * GiB)
        self.d.write_fake(self.fake + "".join(f"proc 0 {m.pid} {used}\n" for m in ms))
        self.assertTrue(wait_for(lambda: "tenant small: its 4 process(es) together use 3.60 GiB "
                                 "on GPU 0, above the tenant's quota of 1.00 GiB" in self.log()),
                        self.log())
        for m in ms:
            self.assertIn(f"{m.pid} 921.6 MiB", self.log())
        # reported once while it lasts, and nobody killed (action report)
        hold_still(0.35, "a few audit passes: the report is not repeated, nobody killed")
        self.assertEqual(self.log().count("tenant small: its 4 process(es)"), 1)
        self.assertTrue(all(m.poll() is None for m in ms))

    def test_within_quota_together_not_reported(self):
        ms = [self.member("small") for _ in range(4)]
        self.d.write_fake(self.fake + "".join(f"proc 0 {m.pid} {GiB // 4}\n" for m in ms))
        hold_still(0.5, "a few audit passes (interval_ms 100): none reports them")
        self.assertNotIn("above the tenant's quota", self.log())
        self.assertNotIn("registered tenant", self.log())

    def test_no_fixed_limit_on_processes_per_gpu(self):
        """2000 listed processes before the one that matters: it is still seen."""
        s = self.stranger()
        lines = "".join(f"proc 0 {NO_SUCH_PID + i} 4096\n" for i in range(2000))
        self.d.write_fake(self.fake + lines + f"proc 0 {s.pid} {GiB}\n")
        self.assertTrue(wait_for(lambda: f"pid {s.pid} (sleep" in self.log()), self.log())


class TenantSumsWithProcessOverhead(AuditCase):
    """process_overhead: what the driver takes per context beyond what the shim
    charges is allowed on top of the quota, per process."""
    extra = "audit: { interval_ms: 100, process_overhead: 200M }\n"

    def test_allowance_per_process(self):
        ms = [self.member("small") for _ in range(4)]
        self.d.write_fake(self.fake + "".join(f"proc 0 {m.pid} {int(0.3 * GiB)}\n" for m in ms))
        hold_still(0.5, "a few audit passes: 1.2 GiB <= 1 GiB + 4 x 200 MiB, not reported")
        self.assertNotIn("above the tenant's quota", self.log())
        self.d.write_fake(self.fake + "".join(f"proc 0 {m.pid} {int(0.9 * GiB)}\n" for m in ms))
        self.assertTrue(wait_for(lambda: "tenant small: its 4 process(es) together use 3.60 GiB"
                                 in self.log()), self.log())


class Openers(AuditCase):
    extra = "audit: { interval_ms: 100, leave_grace_ms: 300, overhead: 512M }\n"

    def test_unregistered_opener_reported_with_pid_uid_and_command(self):
        s = self.spawn(dev=self.node(1), comm="rawalloc")
        m = self.member("small", dev=self.node(0))
        want = (f"pid {s.pid} (rawalloc) has {self.node(1)} open without being a registered "
                f"tenant; the GPU backend does not list it")
        self.assertTrue(wait_for(lambda: want in self.log()), self.log())
        self.assertIn(f"uid {os.getuid()}", self.log().split(want)[1].split("\n")[0])
        self.assertNotIn(f"warn: audit: pid {m.pid}", self.log())
        hold_still(0.3, "a few audit passes (interval_ms 100): reported once")
        self.assertEqual(self.log().count(want), 1)

    def test_unexplained_memory_reported_and_its_holder_named(self):
        """memory.used above the listed processes, the members' holdings and the
        overhead: the opener NVML does not list is named as its holder."""
        s = self.spawn(dev=self.node(0), comm="rawalloc")
        m = self.member("small", dev=self.node(0))
        self.d.write_fake(self.fake + f"proc 0 {m.pid} {GiB // 2}\nstatus 0 {3 * GiB} - - - -\n"
                          f"status 1 {256 << 20} - - - -\n")
        want = (f"GPU 0: 2.00 GiB of memory.used unexplained (memory.used 3.00 GiB; processes "
                f"listed, members' holdings and the overhead allowance 1.00 GiB): held by pid "
                f"{s.pid} (rawalloc) uid {os.getuid()}")
        self.assertTrue(wait_for(lambda: want in self.log()), self.log())
        self.assertNotIn("audit: GPU 1:", self.log())

    def test_holder_with_only_nvidiactl_open_named(self):
        """An RM client lives on its nvidiactl descriptor: a process that closed the
        GPU's node after allocating is still named."""
        s = self.spawn(dev=os.path.join(self.dev, "nvidiactl"), comm="ctlonly")
        self.d.write_fake(self.fake + f"status 0 {3 * GiB} - - - -\n")
        self.assertTrue(wait_for(lambda: f"held by pid {s.pid} (ctlonly)" in self.log()),
                        self.log())
        self.assertIn(f"pid {s.pid} (ctlonly) holds the driver's nodes open while GPU 0 has "
                      "2.50 GiB unexplained", self.log())

    def test_explained_memory_not_reported(self):
        m = self.member("small", dev=self.node(0))
        self.d.write_fake(self.fake + f"proc 0 {m.pid} {GiB // 2}\nstatus 0 {GiB} - - - -\n")
        hold_still(0.8, "a few audit passes (interval_ms 100): explained memory is not reported")
        self.assertNotIn("unexplained", self.log())

    def test_member_that_just_left_is_not_an_intruder_then_is(self):
        """A member closes its connection but its memory is still listed: nothing for
        leave_grace_ms (the driver frees for a few hundred ms); a process that stays
        on the GPU after that is reported."""
        m = self.member("small", dev=self.node(0))
        self.d.write_fake(self.fake + f"proc 0 {m.pid} {GiB // 2}\n")
        pass_time(0.3, "a few audit passes (interval_ms 100) list the member before it leaves")
        m.stdin.write(b"leave\n")
        m.stdin.flush()
        self.assertEqual(m.stdout.readline(), b"left\n")
        self.assertTrue(wait_for(lambda: f"pid {m.pid} left" in self.log()))
        t0 = time.monotonic()
        want = f"pid {m.pid} (python3) uses GPU 0 (512.0 MiB) without being a registered tenant"
        self.assertTrue(wait_for(lambda: want in self.log()), self.log())
        self.assertGreaterEqual(time.monotonic() - t0, 0.15)
        self.assertIn(f"left tenant small", self.log())

    def test_killed_member_still_listed_is_not_an_intruder(self):
        m = self.member("small", dev=self.node(0))
        self.d.write_fake(self.fake + f"proc 0 {m.pid} {GiB // 2}\n")
        pass_time(0.3, "a few audit passes (interval_ms 100) list the member before it is killed")
        m.kill()
        m.wait()
        hold_still(0.25, "within leave_grace_ms (300 ms): the driver would still be freeing")
        self.assertNotIn(f"warn: audit: pid {m.pid}", self.log())

    FORKER = r"""
import os, struct, sys, time
sys.path.insert(0, sys.argv[1])
import kairos_proto as kp
c = kp.Client(sys.argv[2])
c.hello("small")
assert c.charge(0, 64 << 20, 1)[0]  # it holds memory, which its child keeps alive
c.commit(0, 1, True, 64 << 20, 64 << 20)
fd = os.open(sys.argv[3], os.O_RDONLY)
child = os.fork()
if child == 0:  # as the shim's child: not the parent's connection, nor its output
    c.close()
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    time.sleep(30)
    os._exit(0)
if sys.argv[4] == "report":  # what the shim does before fork() returns
    time.sleep(float(sys.argv[5]))  # a report that is slow to arrive
    c.request(kp.FORKED, kp.body("forked", child_pid=child))
print(child, flush=True)
os._exit(0)
"""

    def forked_child_of_departed_member(self, report, late=0.0):
        p = subprocess.run([sys.executable, "-c", self.FORKER, os.path.dirname(kp.__file__),
                            self.d.socket, self.node(0), report, str(late)], capture_output=True,
                           text=True, timeout=30)
        child = int(p.stdout)
        self.addCleanup(lambda: subprocess.run(["kill", "-9", str(child)],
                                               stderr=subprocess.DEVNULL))
        return child

    def test_exited_member_whose_memory_a_child_keeps_is_no_intruder(self):
        """A member forks (FORKED) and exits; the GPU keeps listing the departed pid
        with memory (NVML attributes the memory to its creator, as on the H200, m9):
        its charge lingers for the child, so the exited pid is not reported as a
        process using the GPU unregistered, even after leave_grace_ms."""
        p = subprocess.Popen([sys.executable, "-c", self.FORKER, os.path.dirname(kp.__file__),
                              self.d.socket, self.node(0), "report", "0"],
                             stdout=subprocess.PIPE,
                             text=True)
        parent = p.pid
        child = int(p.stdout.readline())
        self.addCleanup(lambda: subprocess.run(["kill", "-9", str(child)],
                                               stderr=subprocess.DEVNULL))
        self.d.write_fake(self.fake + f"proc 0 {parent} {64 << 20}\n")
        p.wait()
        self.assertTrue(wait_for(lambda: f"pid {parent} left" in self.log() and
                                 "still holds its memory" in self.log()), self.log())
        hold_still(2.5, "well past leave_grace_ms (0.3 s here): still no intruder")
        self.assertNotIn(f"warn: audit: pid {parent}", self.log())

    def test_a_reported_child_holding_a_members_files_is_no_intruder(self):
        """A member forks (FORKED) and exits; its child keeps the GPU's node open: its
        parent's charge stays for it, so it is not reported as an unregistered opener;
        an unreported child is."""
        quiet = self.forked_child_of_departed_member("report")
        loud = self.forked_child_of_departed_member("-")
        want = f"pid {loud} (python3) has {self.node(0)} open without being a registered"
        self.assertTrue(wait_for(lambda: want in self.log()), self.log())
        hold_still(0.5, "a few audit passes (interval_ms 100): the reported child is not named")
        self.assertNotIn(f"pid {quiet} (python3) has", self.log())

    def test_a_childs_fork_report_that_arrives_late_is_waited_for(self):
        """The child holds its parent's files from fork() on; the shim's FORKED report
        comes after it, here 0.2 s (two audit passes) later: the child is not reported
        in between. One never reported is, past leave_grace_ms (0.3 s here)."""
        quiet = self.forked_child_of_departed_member("report", late=0.2)
        self.assertTrue(wait_for(lambda: f"forked pid {quiet}" in self.log()), self.log())
        hold_still(0.3, "leave_grace_ms (0.3 s here): the late-reported child is not named")
        self.assertNotIn(f"pid {quiet} (python3) has", self.log())


class Kill(AuditCase):
    extra = ("audit: { interval_ms: 100, action: kill, leave_grace_ms: 300,\n"
             "         exempt: [ exemptmon, { command: mine, user: " + str(os.getuid()) + " } ] }\n")

    def test_unregistered_process_with_memory_killed_exempt_one_not(self):
        v = self.spawn(comm="intruder")
        e = self.spawn(comm="exemptmon")
        self.d.write_fake(self.fake + f"proc 0 {v.pid} {GiB}\nproc 0 {e.pid} {GiB}\n")
        self.assertEqual(v.wait(timeout=5), -signal.SIGKILL)
        self.assertIn(f"pid {v.pid} (intruder) uses GPU 0 (1.00 GiB) without being a registered "
                      "tenant", self.log())
        self.assertIn("killed (audit action kill)", self.log())
        self.assertTrue(wait_for(lambda: f"pid {e.pid} (exemptmon)" in self.log()))
        self.assertIn("not killed: exempt", self.log())
        hold_still(0.3, "a few audit passes (interval_ms 100): the exempt process is not killed")
        self.assertIsNone(e.poll())

    def test_tenant_over_quota_largest_killed_until_the_rest_fit(self):
        big, small = self.member("small"), self.member("small")
        self.d.write_fake(self.fake + f"proc 0 {big.pid} {GiB}\nproc 0 {small.pid} {GiB // 4}\n")
        self.assertEqual(big.wait(timeout=5), -signal.SIGKILL)
        hold_still(0.3, "a few audit passes (interval_ms 100): the smaller member is not killed")
        self.assertIsNone(small.poll())
        self.assertIn(f"pid {big.pid} (python3) of tenant small uses 1.00 GiB on GPU 0, where "
                      "the tenant is above its quota of 1.00 GiB", self.log())

    def test_exempt_process_over_quota_not_killed(self):
        ex = self.spawn("small", comm="exemptmon")
        self.d.write_fake(self.fake + f"proc 0 {ex.pid} {2 * GiB}\n")
        self.assertTrue(wait_for(lambda: f"pid {ex.pid} (exemptmon) of tenant small uses 2.00 GiB"
                                 in self.log()), self.log())
        self.assertIn("not killed: exempt", self.log())
        hold_still(0.3, "a few audit passes (interval_ms 100): the exempt process is not killed")
        self.assertIsNone(ex.poll())

    def test_holder_of_unexplained_memory_killed(self):
        s = self.spawn(dev=self.node(0), comm="rawalloc")
        self.d.write_fake(self.fake + f"status 0 {3 * GiB} - - - -\n")
        self.assertEqual(s.wait(timeout=5), -signal.SIGKILL)
        self.assertIn("holds", self.log())

    def test_holder_that_comes_later_killed_too(self):
        """An exempt holder first (the finding is reported then), another later."""
        e = self.spawn(dev=self.node(0), comm="exemptmon")
        self.d.write_fake(self.fake + f"status 0 {3 * GiB} - - - -\n")
        self.assertTrue(wait_for(lambda: "not killed: exempt" in self.log()), self.log())
        s = self.spawn(dev=self.node(0), comm="rawalloc")
        self.assertEqual(s.wait(timeout=5), -signal.SIGKILL)
        self.assertIsNone(e.poll())
        self.assertEqual(self.log().count("of memory.used unexplained"), 1)

    def test_member_without_context_holding_unexplained_memory_killed(self):
        """Memory taken past the shim by a member (raw system calls): the member has the
        driver open, no context (NVML does not list it), and is named and killed."""
        listed = self.member("small", dev=self.node(0))
        raw = self.spawn("small", dev=os.path.join(self.dev, "nvidiactl"), comm="rawmember")
        self.d.write_fake(self.fake + f"proc 0 {listed.pid} {GiB // 2}\nstatus 0 {4 * GiB} - - - -\n")
        self.assertEqual(raw.wait(timeout=5), -signal.SIGKILL)
        self.assertIn(f"pid {raw.pid} (rawmember) uid {os.getuid()} (member of tenant small)",
                      self.log())
        self.assertIn(f"pid {raw.pid} (rawmember) holds the driver's nodes open while GPU 0 has "
                      "2.50 GiB unexplained (member of tenant small)", self.log())
        hold_still(0.3, "a few audit passes: a member with a context is not killed")
        self.assertIsNone(listed.poll())  # a member with a context is not a suspect

    def test_opener_without_memory_only_reported(self):
        s = self.spawn(dev=self.node(0), comm="opener")
        self.assertTrue(wait_for(lambda: "not killed (no GPU memory of it is seen)" in self.log()))
        self.assertIsNone(s.poll())

    def test_exemption_by_command_and_uid_needs_both(self):
        mine = self.spawn(comm="mine")
        other = self.spawn(comm="mine", user="nobody") if os.getuid() == 0 else None
        lines = f"proc 0 {mine.pid} {GiB}\n" + (f"proc 0 {other.pid} {GiB}\n" if other else "")
        self.d.write_fake(self.fake + lines)
        if other:
            self.assertEqual(other.wait(timeout=5), -signal.SIGKILL)
        self.assertTrue(wait_for(lambda: f"pid {mine.pid} (mine)" in self.log()))
        hold_still(0.3, "a few audit passes (interval_ms 100): the own process is not killed")
        self.assertIsNone(mine.poll())


class KillBuiltinExempt(AuditCase):
    """Without exempt: root's monitoring tools are never killed; the same name under
    another uid is (a command name is the process's own choice)."""
    extra = "audit: { interval_ms: 100, action: kill }\n"

    def test_roots_nvidia_smi_not_killed_an_impostor_is(self):
        if os.getuid() != 0:
            self.skipTest("needs root to run a process as root and as nobody")
        smi = self.spawn(comm="nvidia-smi")
        fake = self.spawn(comm="nvidia-smi", user="nobody")
        self.d.write_fake(self.fake + f"proc 0 {smi.pid} {GiB}\nproc 0 {fake.pid} {GiB}\n")
        self.assertEqual(fake.wait(timeout=5), -signal.SIGKILL)
        hold_still(0.3, "a few audit passes (interval_ms 100): the real nvidia-smi is not killed")
        self.assertIsNone(smi.poll())
        self.assertIn(f"pid {smi.pid} (nvidia-smi) uses GPU 0", self.log())


class WithoutBackend(unittest.TestCase):
    """No NVML (no GPU backend): the /proc scan still reports an opener and says
    what it cannot check."""

    def test_proc_scan_only(self):
        d = kp.Daemon(KAIROSD, "  - name: small\n    memory: { 0: 1G }\n", gpus=1,
                      extra="audit: { interval_ms: 100, action: kill }\n")
        dev = os.path.join(d.dir, "dev")
        os.mkdir(dev)
        open(os.path.join(dev, "nvidia0"), "w").close()
        os.environ["KAIROS_AUDIT_DEVDIR"] = dev
        os.environ["KAIROS_FAKE_GPU"] = ""
        try:
            d.start()
        finally:
            del os.environ["KAIROS_AUDIT_DEVDIR"]
        p = subprocess.Popen([sys.executable, "-c", CHILD, os.path.dirname(kp.__file__),
                              d.socket, "-", os.path.join(dev, "nvidia0"), "loner"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            self.assertEqual(p.stdout.readline(), b"ready\n")
            self.assertTrue(wait_for(lambda: f"pid {p.pid} (loner) has {dev}/nvidia0 open "
                                     "without being a registered tenant; no GPU backend"
                                     in d.read_log()), d.read_log())
            self.assertIn("without a GPU backend: only the /proc scan", d.read_log())
            self.assertIsNone(p.poll())  # nothing killed without evidence of memory
        finally:
            p.kill()
            p.wait()
            d.stop()


class NvmlBackend(unittest.TestCase):
    """The NVML backend (gpu_nvml.c) on tests/fakenvml: process lists longer than any
    buffer kairosd starts with (NVML's INSUFFICIENT_SIZE), per-tenant sums,
    memory.used, device nodes by minor number."""

    def setUp(self):
        self.d = kp.Daemon(KAIROSD, "  - name: small\n    memory: { 0: 1G }\n",
                           extra="audit: { interval_ms: 100, leave_grace_ms: 200 }\n")
        self.nvml = os.path.join(self.d.dir, "nvml.txt")
        self.write("")
        self.env = {k: os.environ.get(k) for k in ("LD_LIBRARY_PATH", "KAIROS_FAKE_NVML",
                                                   "KAIROS_FAKE_GPU")}
        os.environ["LD_LIBRARY_PATH"] = os.path.dirname(os.path.abspath(FAKE_NVML))
        os.environ["KAIROS_FAKE_NVML"] = self.nvml
        os.environ["KAIROS_FAKE_GPU"] = ""
        try:
            self.d.start()
        finally:
            for k, v in self.env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        self.procs = []

    def tearDown(self):
        reap(self.procs)
        self.d.stop()
        self.assertNotIn("runtime error", self.d.read_log())

    def write(self, extra):
        tmp = self.nvml + ".tmp"
        with open(tmp, "w") as f:
            f.write("gpu 0 GPU-nvml-0000 85899345920\n" + extra)
        os.rename(tmp, self.nvml)

    def member(self):
        p = subprocess.Popen([sys.executable, "-c", CHILD, os.path.dirname(kp.__file__),
                              self.d.socket, "small", "-", "-"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.procs.append(p)
        self.assertEqual(p.stdout.readline(), b"ready\n")
        return p

    def test_nvml_backend(self):
        log = self.d.read_log
        self.assertIn("GPU 0: GPU-nvml-0000, 80.0 GiB (nvml backend)", log())
        # minor number, not the index; logged after the socket accepts (start returns)
        self.assertTrue(wait_for(lambda: "(GPU 0: /dev/nvidia10)" in log(), timeout=10), log())
        stranger = subprocess.Popen(["sleep", "60"])
        self.procs.append(stranger)
        ms = [self.member() for _ in range(4)]
        many = "".join(f"proc 0 {NO_SUCH_PID + i} 4096\n" for i in range(700))
        self.write(many + "".join(f"proc 0 {m.pid} {int(0.9 * GiB)}\n" for m in ms)
                   + f"proc 0 {stranger.pid} {GiB}\nused 0 {12 * GiB}\n")
        self.assertTrue(wait_for(lambda: f"pid {stranger.pid} (sleep) uses GPU 0 (1.00 GiB)"
                                 in log()), log())
        self.assertTrue(wait_for(lambda: "tenant small: its 4 process(es) together use "
                                 "3.60 GiB on GPU 0" in log()), log())
        # 12 GiB used; 3.6 + 1 GiB + 700 x 4 KiB listed, 1 GiB allowance: 6.397 GiB left
        self.assertTrue(wait_for(lambda: "GPU 0: 6.40 GiB of memory.used unexplained" in log()),
                        log())


class Config(unittest.TestCase):
    def check(self, audit):
        d = kp.Daemon(KAIROSD, "", extra=audit + "\n")
        try:
            return subprocess.run([KAIROSD, "-c", d.config, "--check"], capture_output=True,
                                  text=True, timeout=30)
        finally:
            subprocess.run(["rm", "-rf", d.dir])

    def test_settings_accepted(self):
        r = self.check("audit: { interval_ms: 500, action: kill, overhead: 768M, "
                       "process_overhead: 64M, "
                       "leave_grace_ms: 1000,\n  exempt: [ nvidia-persistenced, "
                       "{ user: root }, { command: dcgm-exporter, user: 0 } ] }")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_refusals_say_what_to_do(self):
        for audit, want in [
            ("audit: { action: shoot }", "audit action must be report (log what is found) or kill"),
            ("audit: { exempt: nvidia-smi }", "expected audit exempt as a list"),
            ("audit: { exempt: [ { user: no-such-user-kairos } ] }",
             "'no-such-user-kairos' is neither a uid nor a known user name"),
            ("audit: { exempt: [ { pid: 1 } ] }", "expected command or user"),
            ("audit: { exempt: [ /usr/bin/nvidia-smi ] }", "without '/'"),
            ("audit: { overhead: 1GB }", "audit overhead:"),
            ("audit: { kil: true }", "unknown key 'kil' in audit"),
        ]:
            r = self.check(audit)
            self.assertEqual(r.returncode, 1, audit)
            self.assertRegex(r.stderr, r"kairosd\.yaml:\d+:\d+: ")
            self.assertIn(want, r.stderr)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
