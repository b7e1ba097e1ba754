#!/usr/bin/env python3
"""The Slurm plugin end to end on a single-node Slurm started by this test (munged,
slurmctld, slurmd from Debian's packages, proctrack/linuxproc, no cgroup plugin),
kairosd with the fake GPU, the CUDA-like program on the fake driver:
  - `srun --gpu-mem=64M` runs the program as tenant job-<id>.0: it gets exactly
    64 MiB and the rest is refused; kairos ps shows the tenant while it runs;
  - a task that asks for another tenant (KAIROS_TENANT=other) is capped all the
    same: its pid was admitted, its environment does not choose;
  - the tenant is gone when the step ends;
  - sbatch --gpu-mem makes the batch step a tenant too (job-<id>.batch);
  - a bad --gpu-mem is refused by srun before anything runs.
Skipped, with the reason, when Slurm cannot run here (not root, packages missing,
slurmd not up within 30 s), when the plugin was not built or is sanitized (slurmstepd
has no sanitizer runtime), or when kairos has no `tenant` command. Every wait has
a time limit; everything started is stopped.
Usage: test_slurm.py KAIROSD KAIROS SHIM FAKEDRV_PRELOAD FAKEAPP PLUGIN SANITIZE"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kairos_proto as kp  # noqa: E402
from harness import free_port, polling, wait_for  # noqa: E402

KAIROSD, KAIROS, SHIM, FAKEDRV, FAKEAPP, PLUGIN = map(os.path.abspath, sys.argv[1:7])
SANITIZE = sys.argv[7]  # the paths are absolute: slurmstepd runs elsewhere
MiB = 1 << 20
FAKE_GPU = "gpu 0 GPU-fake-0000 85899345920\n"
SBIN = "/usr/sbin"


def why_not():
    """Why Slurm cannot be tested here, or None."""
    if os.getuid() != 0:
        return "slurmd and the plugin's kairos tenant commands need root"
    for tool in ("munged", "slurmctld", "slurmd"):
        if not os.access(os.path.join(SBIN, tool), os.X_OK):
            return f"{SBIN}/{tool} missing (Debian: munge, slurmctld, slurmd)"
    if not shutil.which("srun"):
        return "srun missing (Debian: slurm-client)"
    if not os.path.exists(PLUGIN):
        return "kairos_spank.so not built (libslurm-dev missing)"
    if SANITIZE != "none":
        return f"the plugin is built with -fsanitize={SANITIZE}'s flags elsewhere; " \
               "slurmstepd has no sanitizer runtime (the optimised build runs this test)"
    r = subprocess.run([KAIROS, "tenant", "--help"], capture_output=True, timeout=10)
    if r.returncode != 0:
        return "kairos has no 'tenant' command yet (kairos tenant set/admit/del: issue 10)"
    return None


class Cluster:
    """munged, slurmctld, slurmd in a temporary directory."""

    def __init__(self, kairos_socket):
        self.dir = tempfile.mkdtemp(prefix="kairos-slurm-")
        self.procs, self.logfiles = [], []
        self.host = socket.gethostname().split(".")[0]
        d = self.dir
        for sub in ("state", "spool", "munge"):
            os.makedirs(os.path.join(d, sub))
        self.munge_socket = os.path.join(d, "munge", "munge.socket")
        with open(os.path.join(d, "munge.key"), "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(os.path.join(d, "munge.key"), 0o600)
        with open(os.path.join(d, "plugstack.conf"), "w") as f:
            f.write(f"required {PLUGIN} kairos={KAIROS} socket={kairos_socket} "
                    f"shim={SHIM} timeout=10\n")
        self.conf = os.path.join(d, "slurm.conf")
        with open(self.conf, "w") as f:
            f.write(f"""ClusterName=kairostest
SlurmctldHost={self.host}
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
ReturnToService=2
MpiDefault=none
PlugStackConfig={d}/plugstack.conf
NodeName={self.host} CPUs={os.cpu_count() or 1} State=UNKNOWN
PartitionName=test Nodes={self.host} Default=YES MaxTime=5 State=UP
""")
        self.env = dict(os.environ, SLURM_CONF=self.conf)

    def start(self):
        d = self.dir
        subprocess.run([f"{SBIN}/munged", "--key-file", f"{d}/munge.key", "--socket",
                        self.munge_socket, "--pid-file", f"{d}/munged.pid", "--log-file",
                        f"{d}/munged.log", "--seed-file", f"{d}/munge.seed", "--force"],
                       check=True, timeout=20, capture_output=True)
        for daemon in ("slurmctld", "slurmd"):
            log = open(os.path.join(d, daemon + ".out"), "w")
            self.logfiles.append(log)
            self.procs.append(subprocess.Popen([f"{SBIN}/{daemon}", "-D"], env=self.env,
                                               stdout=log, stderr=subprocess.STDOUT,
                                               start_new_session=True))
        for _ in polling(30, 0.3):
            r = self.run(["sinfo", "-h", "-o", "%t"], timeout=5)
            if r.returncode == 0 and r.stdout.strip() in ("idle", "mix", "alloc"):
                return None
            if any(p.poll() is not None for p in self.procs):
                break
        return "slurmd did not come up within 30 s: " + self.logs()

    def logs(self):
        text = ""
        for name in ("slurmctld.log", "slurmd.log", "slurmctld.out", "slurmd.out"):
            try:
                with open(os.path.join(self.dir, name)) as f:
                    text += f"\n--- {name}\n" + "".join(f.readlines()[-8:])
            except OSError:
                pass
        return text

    def run(self, args, env=None, timeout=60):
        e = dict(self.env, **(env or {}))
        try:
            return subprocess.run(args, capture_output=True, text=True, env=e, timeout=timeout)
        except subprocess.TimeoutExpired as t:
            return subprocess.CompletedProcess(args, 124, t.stdout or "", f"timed out: {t}")

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        for log in self.logfiles:
            log.close()
        try:
            with open(os.path.join(self.dir, "munged.pid")) as f:
                os.kill(int(f.read().strip()), signal.SIGTERM)
        except (OSError, ValueError):
            pass


REASON = why_not()


@unittest.skipIf(REASON, REASON or "")
class Slurm(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = kp.Daemon(KAIROSD, fake=FAKE_GPU, gpus=1, admins=[0]).start()
        cls.cluster = Cluster(cls.d.socket)
        why = cls.cluster.start()
        if why:
            cls.cluster.stop()
            cls.d.stop()
            raise unittest.SkipTest(why)

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()
        cls.d.stop()

    def task_env(self):
        # the shim finds kairosd through its node file (issue 10), never KAIROS_SOCKET;
        # register: always, as docs/slurm.md advises for Slurm nodes
        return {"LD_PRELOAD": FAKEDRV, **self.d.shim_env(register="always")}

    def tenants(self):
        r = subprocess.run([KAIROS, "ps", "--json", "--socket", self.d.socket],
                           capture_output=True, text=True, timeout=10)
        return {t["name"]: t for t in json.loads(r.stdout)["tenants"]}

    def gone(self, match, seconds=15):
        """No tenant matches within seconds (the step's exit runs as it ends)."""
        return wait_for(lambda: not any(match(n) for n in self.tenants()), seconds, 0.1)

    def srun(self, *args, timeout=60):
        return self.cluster.run(["srun", "-N1", "-n1", "--time=1", *args], env=self.task_env(),
                                timeout=timeout)

    def counts(self, out):
        line = [l for l in out.splitlines() if l.startswith("fakeapp: opens=")]
        self.assertTrue(line, out)
        return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line[-1])}

    def test_step_is_a_tenant_capped_then_gone(self):
        # hold the memory 3 s so that the tenant can be seen while the step runs
        p = subprocess.Popen(["srun", "-N1", "-n1", "--time=1", "--gpu-mem=64M", FAKEAPP,
                              "-n", "40", "-s", str(2 * MiB), "-w", "3"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=dict(self.cluster.env, **self.task_env()))
        seen = None
        for _ in polling(30, 0.1):
            seen = next((t for n, t in self.tenants().items() if n.startswith("job-")), None)
            if p.poll() is not None or seen:
                break
        try:
            out, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        self.assertEqual(p.returncode, 0, err + self.cluster.logs())
        self.assertIsNotNone(seen, "no job-* tenant while the step ran")
        self.assertRegex(seen["name"], r"^job-\d+\.0$")
        self.assertEqual(seen["gpus"][0]["quota"], 64 * MiB)
        c = self.counts(out)
        self.assertEqual(c["vidmem_bytes"], 64 * MiB)  # 8 MiB context + 28 blocks
        self.assertEqual(c["failed"], 12)
        self.assertEqual(c["fb_total_kib"], 64 * 1024)  # it sees the quota as its GPU
        self.assertTrue(self.gone(lambda n: n == seen["name"]), self.tenants())

    def test_environment_does_not_choose_the_tenant(self):
        r = self.srun("--gpu-mem=32M", "/bin/sh", "-c",
                      f"KAIROS_TENANT=other exec {FAKEAPP} -n 40 -s {2 * MiB}")
        self.assertEqual(r.returncode, 0, r.stderr + self.cluster.logs())
        self.assertEqual(self.counts(r.stdout)["vidmem_bytes"], 32 * MiB)

    def test_unsetting_the_tenant_is_no_way_around_the_quota(self):
        r = self.srun("--gpu-mem=32M", "/bin/sh", "-c",
                      f"unset KAIROS_TENANT; exec {FAKEAPP} -n 40 -s {2 * MiB}")
        self.assertEqual(r.returncode, 0, r.stderr + self.cluster.logs())
        self.assertEqual(self.counts(r.stdout)["vidmem_bytes"], 32 * MiB)

    def test_sbatch_batch_step(self):
        """sbatch --gpu-mem reaches the batch step: tenant job-<id>.batch."""
        out = os.path.join(self.cluster.dir, "batch.out")
        script = f"echo tenant=$KAIROS_TENANT; {FAKEAPP} -n 20 -s {MiB}"
        r = self.cluster.run(["sbatch", "--wait", "--time=1", "--gpu-mem=16M", "-o", out,
                              "--wrap", script], env=self.task_env(), timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr + self.cluster.logs())
        with open(out) as f:
            text = f.read()
        self.assertRegex(text, r"tenant=job-\d+\.batch\n")
        self.assertEqual(self.counts(text)["vidmem_bytes"], 16 * MiB)
        self.assertTrue(self.gone(lambda n: n.endswith(".batch")), self.tenants())

    def test_bad_option_refused_before_running(self):
        r = self.srun("--gpu-mem=8GB", "/bin/echo", "ran")
        self.assertNotEqual(r.returncode, 0)
        self.assertNotIn("ran", r.stdout)
        self.assertIn("--gpu-mem=8GB", r.stderr)
        r = self.srun("--gpu-share=30%", "/bin/echo", "ran")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("go with --gpu-mem", r.stderr)

    def test_without_options_nothing_changes(self):
        # an earlier test's step tenant goes when its step's exit has run: not this one's
        self.assertTrue(self.gone(lambda n: n.startswith("job-")), self.tenants())
        before = set(self.tenants())
        r = self.srun("/bin/echo", "plain")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "plain")
        self.assertEqual(set(self.tenants()), before)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
