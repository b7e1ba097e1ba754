#!/usr/bin/env python3
"""Space mode's routing and its MPS control daemons, with the stand-in control daemon
(tests/stand-ins/nvidia-cuda-mps-control) and the real kairosd and libkairos.so.

A tenant's process asks getenv for CUDA_MPS_* as libcuda does (through ctypes, so the
shim's exported getenv answers): a process of a fault domain gets its domain's pipe
folder and the client priority kairosd derives from the domain's priorities, whatever
its environment says; a process of no domain that names a domain's pipe folder gets
none; a domain whose MPS cannot run refuses the process with the reason; a control
daemon that dies is noticed and started again, and one left by a stopped kairosd is
adopted by the next. kairos run --fault-domain (and kairos tenant set's): an
administrator's ad-hoc tenant is routed into a declared domain, an undeclared one is
refused with what to do, nobody else may set one, a tenant with a process keeps its
domain, the domain survives a restart of kairosd (the state file), and a kairosd of
before that refuses the longer TENANT_SET is said to be too old for the option. GPU
faults, as the driver's Xid lines in the kernel log (here a FIFO kairosd reads instead
of /dev/kmsg), are blamed on the tenant whose process the line names, cost the other
tenants of its fault domain on that GPU their work and nobody else, and show in kairos
ps and the metrics' counters. Every other name the shim's getenv answers as glibc's
does (PlainNames).
Usage: test_space.py KAIROSD SHIM KAIROS"""
import datetime
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import line_of, wait_value  # noqa: E402
import kairos_proto as kp  # noqa: E402

KAIROSD, SHIM, KAIROS = sys.argv[1:4]
ASAN_FIRST = os.environ.get("KAIROS_PRELOAD_FIRST", "")
STAND_IN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "stand-ins",
                        "nvidia-cuda-mps-control")
TENANTS = """  - name: train
    memory: { 0: 64M }
    fault_domain: infer
    compute: { 0: { priority: batch } }
  - name: serve
    memory: { 0: 64M }
    fault_domain: infer
    sms: 30%
    compute: { 0: { priority: latency } }
  - name: plain
    memory: { 0: 64M }
  - name: visitor
    memory: { 0: 64M }
    fault_domain: infer
    members: { users: [65534] }
"""
NOBODY = 65534
DOMAIN = "inference-a"  # declared under space: domains: (the docs' example)
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def as_nobody():
    """preexec_fn: the process runs as nobody."""
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)
ASK = ("import ctypes; g = ctypes.CDLL(None).getenv; g.restype = ctypes.c_char_p\n"
       "for n in (b'CUDA_MPS_PIPE_DIRECTORY', b'CUDA_MPS_CLIENT_PRIORITY',"
       " b'CUDA_MPS_ACTIVE_THREAD_PERCENTAGE'):\n"
       "    v = g(n); print(v.decode() if v is not None else 'None')\n")


class Space(unittest.TestCase):
    def start(self, control=os.path.abspath(STAND_IN)):
        self.d = kp.Daemon(KAIROSD, TENANTS, gpus=1,
                           extra=f"space:\n  mps_control: {control}\n"
                                 f"  domains:\n    {DOMAIN}: {{ shared_uids: false }}\n").start()
        self.root = os.path.join(os.path.dirname(self.d.socket), "mps")

    def tearDown(self):
        self.assertEqual(self.d.stop(), 0)
        for entry in os.listdir(self.root) if os.path.isdir(self.root) else []:
            self.control_pid(entry, kill=True)

    def control_pid(self, entry, kill=False):
        try:
            pid = int(open(os.path.join(self.root, entry, "control.pid")).read())
        except (OSError, ValueError):
            return None
        if kill:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return pid

    def env(self, **extra):
        e = {k: v for k, v in os.environ.items()
             if not k.startswith(("KAIROS_", "CUDA_MPS_", "SUDO_"))}
        e["LD_PRELOAD"] = " ".join(p for p in (ASAN_FIRST, SHIM) if p)
        e["ASAN_OPTIONS"] = "detect_leaks=0:verify_asan_link_order=0"
        e.update(self.d.shim_env())
        e.update(KAIROS_LOG="stderr", **extra)
        return e

    def ask(self, tenant, preexec_fn=None, **env_extra):
        r = subprocess.run([PYTHON, "-c", ASK], capture_output=True, text=True,
                           env=self.env(KAIROS_TENANT=tenant, **env_extra), timeout=60,
                           preexec_fn=preexec_fn)
        return r, r.stdout.split()

    def kairos(self, *args, preexec_fn=None):
        """The kairos CLI, talking to this kairosd; kairos run preloads the shim itself
        (KAIROS_SHIM)."""
        e = self.env(KAIROS_SHIM=SHIM, KAIROS_SOCKET=self.d.socket)
        e["LD_PRELOAD"] = ASAN_FIRST
        return subprocess.run([KAIROS, *args], capture_output=True, text=True, env=e,
                              timeout=60, preexec_fn=preexec_fn)

    def pipe(self, domain, uid=None):
        return os.path.join(self.root, f"{domain}@{os.getuid() if uid is None else uid}", "pipe")

    def log(self):
        return open(self.d.log).read()

    def assert_retired(self, domain):
        """domain's daemon for this uid, named by no tenant now, is asked to quit at once
        (not at the next reload) and exits."""
        wait_value(lambda: f"space: fault domain {domain} is named by no tenant now" in self.log(),
                 f"kairosd to retire {domain}")
        control_log = os.path.join(self.root, f"{domain}@{os.getuid()}", "log", "control.log")
        wait_value(lambda: "command: quit" in open(control_log).read(), "the quit command")
        pid = self.control_pid(f"{domain}@{os.getuid()}")
        wait_value(lambda: ended(pid), "the daemon's exit")

    def test_domain_members_get_their_domain_whatever_their_environment(self):
        self.start()
        pipe = os.path.join(self.root, f"infer@{os.getuid()}", "pipe")
        forged = {"CUDA_MPS_PIPE_DIRECTORY": "/tmp/elsewhere", "CUDA_MPS_CLIENT_PRIORITY": "0",
                  "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "5"}
        r, (got_pipe, prio, pct) = self.ask("train", **forged)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual((got_pipe, prio, pct), (pipe, "1", "100"))  # batch below latency
        self.assertIn("space: fault domain infer, MPS pipe " + pipe, r.stderr)
        self.assertTrue(os.path.exists(os.path.join(pipe, "control")))
        r, (got_pipe, prio, pct) = self.ask("serve")
        self.assertEqual((got_pipe, prio, pct), (pipe, "0", "30"))  # its sms: 30%
        self.assertIn("(priority 0, 30 % of the SMs)", self.log())
        self.assertEqual(self.log().count("started the MPS control daemon"), 1)  # one daemon

    @unittest.skipUnless(os.geteuid() == 0, "needs root to start a process as nobody")
    def test_another_users_daemon_runs_as_that_user_in_folders_of_its_own(self):
        """Nothing of root's opens a file in a folder the user owns: the daemon of
        nobody's processes runs as nobody (a symlink planted there is nobody's)."""
        self.start()
        r, (got_pipe, _, _) = self.ask("visitor", preexec_fn=as_nobody)
        self.assertEqual(r.returncode, 0, r.stderr)
        entry = f"infer@{NOBODY}"
        self.assertEqual(got_pipe, os.path.join(self.root, entry, "pipe"))
        for leaf, mode in (("pipe", 0o700), ("log", 0o755)):
            st = os.stat(os.path.join(self.root, entry, leaf))
            self.assertEqual((st.st_uid, st.st_mode & 0o777), (NOBODY, mode), leaf)
        pid = self.control_pid(entry)
        uids = [line for line in open(f"/proc/{pid}/status") if line.startswith("Uid:")][0]
        self.assertEqual(uids.split()[1:], [str(NOBODY)] * 4)

    def test_a_process_of_no_domain_is_kept_out_of_the_domains(self):
        self.start()
        self.ask("serve")  # the domain's daemon runs
        inside = os.path.join(self.root, f"infer@{os.getuid()}", "pipe")
        r, (got_pipe, prio, _) = self.ask("plain", CUDA_MPS_PIPE_DIRECTORY=inside,
                                          CUDA_MPS_CLIENT_PRIORITY="1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(got_pipe, "None")  # not another domain's server
        self.assertEqual(prio, "1")         # its own MPS settings stand otherwise
        self.assertNotIn("space:", r.stderr)
        r, (got_pipe, _, _) = self.ask("plain", CUDA_MPS_PIPE_DIRECTORY="/tmp/own-mps")
        self.assertEqual(got_pipe, "/tmp/own-mps")  # an MPS of its own is its business

    def test_no_mps_on_the_node_refuses_the_process_with_the_reason(self):
        self.start(control="/nonexistent/nvidia-cuda-mps-control")
        r, _ = self.ask("train")
        self.assertIn("GPU access refused", r.stderr)
        self.assertIn("fault domain infer needs NVIDIA MPS", r.stderr)
        r, (got_pipe, _, _) = self.ask("plain")  # a tenant of no domain is not affected
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("refused", r.stderr)

    def test_a_dead_daemon_is_started_again_and_a_live_one_adopted(self):
        self.start()
        self.ask("train")
        entry = f"infer@{os.getuid()}"
        first = self.control_pid(entry)
        os.kill(first, signal.SIGKILL)
        wait_value(lambda: "was killed by signal 9" in self.log(), "kairosd to notice the exit")
        self.ask("serve")
        second = wait_value(lambda: self.control_pid(entry), "a new control daemon")
        self.assertNotEqual(first, second)
        self.assertEqual(self.d.stop(), 0)
        os.kill(second, 0)  # left running for its clients
        self.d.start()
        wait_value(lambda: f"adopted the MPS control daemon of fault domain infer (pid {second})"
                 in self.log(), "the adoption")
        self.ask("train")
        self.assertEqual(self.control_pid(entry), second)  # no second daemon

    def quit_domains(self, wait=None):
        """kairosd --quit-domains[=wait] with this kairosd's configuration."""
        opt = "--quit-domains" + ("" if wait is None else f"={wait}")
        return subprocess.run([KAIROSD, "-c", self.d.config, "-l", "error", opt],
                              capture_output=True, text=True, timeout=60, env=self.env())

    def test_quit_domains_ends_what_a_stopped_kairosd_left_and_nothing_while_it_runs(self):
        """kairosd --quit-domains is refused while kairosd runs (it would start the
        daemons again) and touches nothing then; once kairosd is stopped it asks each
        daemon left running to quit. One that cannot quit yet (stopped here; on a node,
        its clients still run) is named and the exit status says so; it quits once it
        can, and the next kairosd finds nothing to adopt."""
        self.start()
        self.ask("train")
        self.kairos("tenant", "set", "keep", "--mem", "64M", "--fault-domain", DOMAIN)
        self.ask("keep")
        infer, other = f"infer@{os.getuid()}", f"{DOMAIN}@{os.getuid()}"
        pids = {e: wait_value(lambda e=e: self.control_pid(e), e) for e in (infer, other)}
        control_log = {e: os.path.join(self.root, e, "log", "control.log") for e in pids}
        r = self.quit_domains()
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("a kairosd is running", r.stderr)
        self.assertIn("systemctl stop kairosd", r.stderr)
        for e, pid in pids.items():
            os.kill(pid, 0)
            self.assertNotIn("command: quit", open(control_log[e]).read())
        self.assertEqual(self.d.stop(), 0)
        os.kill(pids[other], signal.SIGSTOP)
        self.addCleanup(lambda: os.path.exists(f"/proc/{pids[other]}") and
                        os.kill(pids[other], signal.SIGCONT))
        r = self.quit_domains(1)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn(f"infer (uid {os.getuid()}): the MPS control daemon (pid {pids[infer]}) "
                      "has quit", r.stdout)
        self.assertIn(f"{DOMAIN} (uid {os.getuid()}): the MPS control daemon "
                      f"(pid {pids[other]}) still runs", r.stdout)
        self.assertIn("command: quit", open(control_log[infer]).read())
        self.assertIsNone(self.control_pid(infer))  # its pid file went with it
        os.kill(pids[other], signal.SIGCONT)  # it takes its quit and exits
        wait_value(lambda: ended(pids[other]), "the second daemon's exit")
        r = self.quit_domains(5)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("no fault domain's MPS control daemon runs", r.stdout)
        self.d.start()
        self.assertNotIn("adopted", self.log())

    def test_kairos_run_puts_an_ad_hoc_tenant_in_a_declared_domain(self):
        self.start()
        r = self.kairos("run", "--mem", "64M", "--fault-domain", DOMAIN, "--", PYTHON, "-c", ASK)
        self.assertEqual(r.returncode, 0, r.stderr)
        got_pipe, prio, pct = r.stdout.split()
        self.assertEqual((got_pipe, prio, pct), (self.pipe(DOMAIN), "0", "100"))
        self.assertIn(f"fault domain {DOMAIN} (its processes are clients", r.stderr)
        self.assertIn(f"space: fault domain {DOMAIN}, MPS pipe {self.pipe(DOMAIN)}", r.stderr)
        self.assertTrue(os.path.exists(os.path.join(self.pipe(DOMAIN), "control")))
        self.assert_retired(DOMAIN)  # the ad hoc tenant went with its command
        # a domain the configuration does not declare (infer is only named by tenants):
        # refused, saying what to do; the tenant is not created
        for domain in ("nowhere", "infer"):
            r = self.kairos("run", "--tenant", "adhoc", "--mem", "64M", "--fault-domain", domain,
                            "--", "true")
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn(f"fault domain '{domain}' is not declared in {self.d.config}",
                          r.stderr)
            self.assertIn("add it under space: domains: and reload kairosd", r.stderr)
            self.assertNotIn("adhoc", self.d.ps())
        r = self.kairos("run", "--mem", "64M", "--fault-domain", "-x", "--", "true")
        self.assertEqual(r.returncode, 2)
        self.assertIn("a fault domain's name is 1-63 characters", r.stderr)

    @unittest.skipUnless(os.geteuid() == 0, "needs root to run kairos as nobody")
    def test_only_an_administrator_sets_a_fault_domain(self):
        self.start()
        r = self.kairos("tenant", "set", "job", "--mem", "64M")
        self.assertEqual(r.returncode, 0, r.stderr)
        for args in (["tenant", "set", "job", "--fault-domain", DOMAIN],
                     ["run", "--tenant", "job", "--fault-domain", DOMAIN, "--", "true"],
                     ["run", "--mem", "64M", "--fault-domain", DOMAIN, "--", "true"]):
            r = self.kairos(*args, preexec_fn=as_nobody)
            self.assertEqual(r.returncode, 1, (args, r.stderr))
            self.assertIn("permission denied: only root or an administrator", r.stderr)
        self.assertEqual(sorted(self.d.ps()), ["job", "plain", "serve", "train", "visitor"])
        r, (got_pipe, _, _) = self.ask("job")  # still in no domain
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(got_pipe, "None")

    def test_a_run_time_domain_survives_a_restart(self):
        """Kept in the state file; kept too while a process of the tenant runs (its
        route is decided); then taken out with --fault-domain ''."""
        self.start()
        r = self.kairos("tenant", "set", "keep", "--mem", "64M", "--fault-domain", DOMAIN)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f'"fault_domain": "{DOMAIN}"', open(self.d.state).read())
        self.assertEqual(self.d.stop(), 0)
        self.d.start()
        r, (got_pipe, _, _) = self.ask("keep")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(got_pipe, self.pipe(DOMAIN))
        # a process of the tenant runs: its route is decided, the domain stays
        held = subprocess.Popen([PYTHON, "-u", "-c", ASK + "import sys; sys.stdin.read()\n"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env=self.env(KAIROS_TENANT="keep"))
        try:
            self.assertEqual(line_of(held), self.pipe(DOMAIN))
            r = self.kairos("tenant", "set", "keep", "--fault-domain", "")
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn(f"has 1 process(es), already routed (fault domain {DOMAIN})", r.stderr)
            self.assertIn("stop them first", r.stderr)
        finally:
            held.communicate("", timeout=60)
        wait_value(lambda: not self.d.ps()["keep"]["pids"], "the process to leave")
        r = self.kairos("tenant", "set", "keep", "--fault-domain", "")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("tenant keep: in no fault domain", r.stderr)
        self.assert_retired(DOMAIN)  # keep was the last tenant to name it
        r, (got_pipe, _, _) = self.ask("keep")
        self.assertEqual(got_pipe, "None")
        self.assertNotIn("fault_domain", open(self.d.state).read())

    def test_a_daemon_asked_to_quit_is_asked_once_and_takes_no_new_process(self):
        """The domain's daemon cannot act on its quit yet (stopped here; on a node, its
        clients still run): more changes of tenants send no second quit, and a process
        of a tenant that names the domain again is refused, saying why, rather than
        routed to a server that takes no new client. Once the daemon is gone, the next
        process starts a new one."""
        self.start()
        self.assertEqual(self.kairos("tenant", "set", "keep", "--mem", "64M", "--fault-domain",
                                     DOMAIN).returncode, 0)
        r, (got_pipe, _, _) = self.ask("keep")
        self.assertEqual(got_pipe, self.pipe(DOMAIN))
        wait_value(lambda: not self.d.ps()["keep"]["pids"], "the process to leave")
        entry = f"{DOMAIN}@{os.getuid()}"
        first = self.control_pid(entry)
        os.kill(first, signal.SIGSTOP)
        self.addCleanup(lambda: os.path.exists(f"/proc/{first}") and
                        os.kill(first, signal.SIGCONT))
        self.assertEqual(self.kairos("tenant", "set", "keep", "--fault-domain", "").returncode,
                         0)
        before = sorted(self.d.ps())
        for _ in range(3):  # more changes of tenants: ad hoc tenants come and go
            self.assertEqual(self.kairos("run", "--mem", "8M", "--", "true").returncode, 0)
            wait_value(lambda: sorted(self.d.ps()) == before, "the ad hoc tenant to go")
        self.assertEqual(self.log().count(f"space: fault domain {DOMAIN} is named by no "
                                          "tenant now"), 1)
        self.assertEqual(self.kairos("tenant", "set", "keep", "--fault-domain",
                                     DOMAIN).returncode, 0)
        r, (got_pipe, _, _) = self.ask("keep")
        self.assertIn(f"the MPS control daemon of fault domain {DOMAIN} (pid {first}) is "
                      "shutting down", r.stderr)
        self.assertEqual(got_pipe, "None")
        os.kill(first, signal.SIGCONT)  # it takes its quit and exits
        wait_value(lambda: "command: quit" in open(
            os.path.join(self.root, entry, "log", "control.log")).read(), "the quit")
        wait_value(lambda: self.control_pid(entry) is None, "kairosd to see the daemon exit")
        r, (got_pipe, _, _) = self.ask("keep")
        self.assertEqual(got_pipe, self.pipe(DOMAIN), r.stderr)
        self.assertNotEqual(self.control_pid(entry), first)

    def test_a_configured_tenant_keeps_the_configurations_domain(self):
        self.start()
        r = self.kairos("tenant", "set", "plain", "--fault-domain", DOMAIN)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("tenant 'plain' is declared in the configuration, which sets its fault "
                      "domain", r.stderr)
        r, (got_pipe, _, _) = self.ask("plain")
        self.assertEqual(got_pipe, "None")


class OldKairosd(unittest.TestCase):
    """A kairosd of before --fault-domain: its exact-size rule refuses the 456-byte
    TENANT_SET (ERROR PROTOCOL, the connection closed) and takes the 392-byte one."""

    def serve(self, path, sizes):
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        listener.bind(path)
        listener.listen(4)
        listener.settimeout(30)
        ps = kp.LAYOUTS["kairos_ps_reply"].pack(stop="hold", flags=kp.PS_LAST, n_gpus=1)

        def run():
            with listener:
                conn, _ = listener.accept()
                with conn:
                    while True:
                        data = conn.recv(8192)
                        if not data:
                            return
                        _, _, type_, size, seq = kp.HDR.unpack_from(data)
                        if type_ == kp.PS:
                            conn.send(kp.pack(kp.PS_REPLY, ps, seq))
                        elif size == kp.TENANT_SET_SIZE_V1:
                            sizes.append(size)
                            conn.send(kp.pack(kp.OK, b"", seq))
                        else:
                            sizes.append(size)
                            why = (f"TENANT_SET body is {size} bytes (header says {size}); "
                                   f"it must be exactly {kp.TENANT_SET_SIZE_V1}")
                            conn.send(kp.pack(kp.ERROR, kp.body(
                                "error", code=kp.ERR_PROTOCOL, message=why), seq))
                            return
        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t

    def test_too_old_for_the_option_and_fine_without_it(self):
        with tempfile.TemporaryDirectory() as d:
            sizes = []
            for n, args in enumerate((["--fault-domain", DOMAIN], [])):
                path = os.path.join(d, f"old{n}.sock")
                t = self.serve(path, sizes)
                r = subprocess.run([KAIROS, "tenant", "set", "job", "--mem", "64M", *args,
                                    "--socket", path], capture_output=True, text=True,
                                   timeout=60)
                t.join(30)
                if args:
                    self.assertEqual(r.returncode, 1)
                    self.assertIn("this kairosd is too old for --fault-domain", r.stderr)
                    self.assertIn("upgrade kairosd, or leave out --fault-domain", r.stderr)
                else:
                    self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(sizes, [kp.LAYOUTS["kairos_tenant_set"].size,
                                     kp.TENANT_SET_SIZE_V1])


# A member of tenant argv[2] holding 1 MiB on GPU 0 until its stdin closes.
MEMBER = r"""
import sys
sys.path.insert(0, sys.argv[3])
import kairos_proto as kp
c = kp.Client(sys.argv[1])
c.hello(sys.argv[2])
assert c.charge(0, 1 << 20, 1)[0]
c.commit(0, 1, True, 1 << 20, 1 << 20)
print("ready", flush=True)
sys.stdin.read()
"""


class Faults(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kairos-faults-")
        self.fifo = os.path.join(self.tmp, "kmsg")
        os.mkfifo(self.fifo, 0o600)
        self.d = kp.Daemon(KAIROSD, TENANTS, gpus=1,
                           fake="gpu 0 GPU-fake-0000 85899345920\npci 0 0000:65:00\n",
                           extra=f"space:\n  mps_control: {os.path.abspath(STAND_IN)}\n"
                                 f"kernel_log: {self.fifo}\n").start()
        self.members = {}
        self.writer = os.open(self.fifo, os.O_WRONLY)

    def tearDown(self):
        for p in self.members.values():
            p.stdin.close()
            p.wait(10)
        os.close(self.writer)
        self.assertEqual(self.d.stop(), 0)
        root = os.path.join(os.path.dirname(self.d.socket), "mps")
        for entry in os.listdir(root) if os.path.isdir(root) else []:
            Space.control_pid(self, entry, kill=True)

    def member(self, tenant):
        here = os.path.dirname(os.path.abspath(__file__))
        p = subprocess.Popen([sys.executable, "-c", MEMBER, self.d.socket, tenant, here],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.assertEqual(line_of(p), "ready")
        self.members[tenant] = p
        return p.pid

    def xid(self, text):
        os.write(self.writer, (text + "\n").encode())

    def faults(self):
        c = self.d.client()
        try:
            return {n: t["faults"] for n, t in c.ps(faults=True).items()}
        finally:
            c.close()

    def test_a_domain_fault_blames_nobody_by_name_and_costs_the_domain(self):
        """Under MPS the driver names a client of the server, not the one that faulted
        (bench/results/2026-12-07-h100-mps-fault): a report naming train's process costs
        train and serve, the domain's tenants on the GPU, their work and blames neither;
        one naming plain's, of no domain, blames plain alone."""
        train, serve = self.member("train"), self.member("serve")
        plain = self.member("plain")
        self.xid(f"NVRM: Xid (PCI:0000:65:00): 13, pid={train}, name=python3, Graphics SM "
                 "Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address")
        f = wait_value(lambda: (lambda f: f if f["serve"]["faults_lost"] else None)(
            self.faults()), "kairosd to count the fault")
        self.assertEqual((f["train"]["faults_caused"], f["train"]["faults_lost"]), (0, 1))
        self.assertEqual((f["serve"]["faults_caused"], f["serve"]["faults_lost"]), (0, 1))
        self.assertEqual((f["plain"]["faults_caused"], f["plain"]["faults_lost"]), (0, 0))
        self.assertEqual(f["train"]["fault_domain"], "infer")
        self.assertEqual(f["plain"]["fault_domain"], "")
        self.assertEqual((f["serve"]["sm_percent"], f["train"]["sm_percent"]), (30, 0))
        self.assertEqual((f["serve"]["last_fault_xid"], f["serve"]["last_fault_gpu"],
                          f["serve"]["last_fault_caused"]), (13, 0, 0))
        log = self.d.read_log()
        self.assertIn("fault: Xid 13 on GPU 0 in fault domain infer: one of its clients caused "
                      "it and the driver does not say which (it names process "
                      f"{train} (python3) of tenant train, the one it names under MPS", log)
        self.assertRegex(log, r"; (train, serve|serve, train) lost their work")
        self.assertNotIn("of tenant train caused it", log)
        self.assertNotEqual(serve, train)
        out = subprocess.run([KAIROS, "ps", "--socket", self.d.socket, "--json"],
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        tenants = {t["name"]: t for t in json.loads(out.stdout)["tenants"]}
        self.assertEqual(tenants["train"]["faults"]["caused"], 0)
        self.assertEqual(tenants["train"]["faults"]["lost_work"], 1)
        self.assertEqual(tenants["serve"]["faults"]["lost_work"], 1)
        self.assertEqual(tenants["serve"]["faults"]["last"]["xid"], 13)
        self.assertIsNone(tenants["plain"]["fault_domain"])
        self.assertEqual(tenants["serve"]["sm_percent"], 30)
        self.assertIsNone(tenants["train"]["sm_percent"])
        table = subprocess.run([KAIROS, "ps", "--socket", self.d.socket], capture_output=True,
                               text=True, timeout=30).stdout.splitlines()
        head = table[0].split()
        self.assertEqual(head[head.index("DOMAIN"):head.index("FAULTS") + 1],
                         ["DOMAIN", "SMS", "FAULTS"])
        row = next(l.split() for l in table if l.startswith("serve"))
        self.assertEqual(row[row.index("infer"):row.index("infer") + 3], ["infer", "30%", "0/1"])
        row = next(l.split() for l in table if l.startswith("train"))
        self.assertEqual(row[row.index("infer"):row.index("infer") + 3], ["infer", "-", "0/1"])
        self.xid(f"NVRM: Xid (PCI:0000:65:00): 13, pid={plain}, name=python3, x")
        wait_value(lambda: f"process {plain} (python3) of tenant plain caused it" in
                 self.d.read_log(), "kairosd to blame plain")
        f = self.faults()
        self.assertEqual((f["plain"]["faults_caused"], f["plain"]["faults_lost"]), (1, 0))
        self.assertEqual([f[t]["faults_lost"] for t in ("train", "serve")], [1, 1])

    def test_lines_that_are_no_report_of_ours_blame_nobody(self):
        """A fault of another GPU, of a process in no tenant, a forged shape: nothing
        counts against a tenant, and kairosd reads on."""
        train = self.member("train")
        self.xid(f"NVRM: Xid (PCI:0000:66:00): 13, pid={train}, name=python3, x")  # not ours
        self.xid("NVRM: Xid (PCI:0000:65:00): 43, pid=1, name=init, Ch 00000010")
        self.xid("NVRM: Xid (PCI:0000:65:00) 13, pid=%d, name=python3, x" % train)  # malformed
        self.xid("x" * 5000)  # longer than a line
        self.xid("NVRM: Xid (PCI:0000:65:00): 31, pid='<unknown>', name=<unknown>, MMU Fault")
        wait_value(lambda: "the driver named no process" in self.d.read_log(), "the last line")
        log = self.d.read_log()
        self.assertIn("on the GPU at PCI 0000:66:00 (none of kairosd's) in fault domain infer: "
                      "tenant train caused it, the domain's only tenant with a process there "
                      f"(the driver names process {train} (python3) of tenant train)", log)
        self.assertIn("process 1 (init) is in no tenant", log)
        f = self.faults()
        self.assertEqual(f["train"]["faults_caused"], 1)  # the other GPU's line is its own
        self.assertEqual(f["serve"]["faults_lost"], 0)    # serve has no process there
        self.assertTrue(self.d.alive())


# A member of tenant argv[2] that asks its route (kairosd starts its domain's daemon),
# then waits for its stdin to close.
ROUTED_MEMBER = r"""
import sys
sys.path.insert(0, sys.argv[3])
import kairos_proto as kp
c = kp.Client(sys.argv[1])
c.request(kp.HELLO, kp.hello_body(sys.argv[2], __import__("os").getpid(), None,
                                  kp._C["KAIROS_HELLO_SPACE"]))
t, _ = c.request(kp._C["KAIROS_MSG_ROUTE"], kp.body("route"))
assert t == kp._C["KAIROS_MSG_ROUTED"], t
print("ready", flush=True)
sys.stdin.read()
"""


class AuditKill(unittest.TestCase):
    """The audit kills a member of a fault domain (audit: { kill: true }, beyond its
    quota on the GPU): its MPS client is ended first with terminate_client to its
    domain's control daemon, naming the daemon's server and the member, so that the
    kill cannot fault the domain's other clients."""

    def setUp(self):
        self.d = kp.Daemon(KAIROSD, TENANTS, gpus=1, fake="gpu 0 GPU-fake-0000 85899345920\n",
                           extra=f"space:\n  mps_control: {os.path.abspath(STAND_IN)}\n"
                                 "audit: { interval_ms: 100, kill: true }\n").start()
        self.root = os.path.join(os.path.dirname(self.d.socket), "mps")

    def tearDown(self):
        self.assertEqual(self.d.stop(), 0)
        for entry in os.listdir(self.root) if os.path.isdir(self.root) else []:
            Space.control_pid(self, entry, kill=True)

    def server_pid(self):
        """The pid of the stand-in server of domain infer's daemon for this uid, once it
        has one."""
        control_log = os.path.join(self.root, f"infer@{os.getuid()}", "log", "control.log")
        try:
            with open(control_log) as f:
                return next((l.split()[-1] for l in f if "server pid" in l), None)
        except FileNotFoundError:
            return None

    def test_terminate_client_before_the_kill(self):
        here = os.path.dirname(os.path.abspath(__file__))
        p = subprocess.Popen([sys.executable, "-c", ROUTED_MEMBER, self.d.socket, "train", here],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.assertEqual(line_of(p), "ready")
        control_log = os.path.join(self.root, f"infer@{os.getuid()}", "log", "control.log")
        server = wait_value(self.server_pid, "the stand-in's server")
        self.d.write_fake(f"gpu 0 GPU-fake-0000 85899345920\nproc 0 {p.pid} {4 << 30}\n")
        self.assertEqual(p.wait(10), -signal.SIGKILL)
        with open(control_log) as f:
            self.assertIn(f"command: terminate_client {server} {p.pid}", f.read())
        # kairosd logs the kill just after it: the member may be reaped first
        log = wait_value(lambda: (lambda t: t if "killed (audit action kill)" in t else None)(
            self.d.read_log()), "the kill's line")
        self.assertIn(f"audit: pid {p.pid} of tenant train: its MPS client was ended first "
                      "(terminate_client), so that the kill spares fault domain infer", log)
        # the notice comes before the kill's line
        self.assertLess(log.index("its MPS client was ended first"),
                        log.index("killed (audit action kill)"))
        p.stdin.close()

    def test_a_control_daemon_that_never_answers_holds_up_nothing_but_its_kill(self):
        """The member's uid owns its domain's control daemon and stops it (SIGSTOP): the
        terminate_client before the kill gets no answer. kairosd serves everyone while
        it waits (a `kairos ps` is answered before the member dies), then kills the
        member anyway, saying that its MPS client could not be ended first."""
        here = os.path.dirname(os.path.abspath(__file__))
        p = subprocess.Popen([sys.executable, "-c", ROUTED_MEMBER, self.d.socket, "train", here],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.addCleanup(p.kill)
        self.assertEqual(line_of(p), "ready")
        wait_value(self.server_pid, "the stand-in's server")
        control = Space.control_pid(self, f"infer@{os.getuid()}")
        os.kill(control, signal.SIGSTOP)
        self.addCleanup(lambda: os.kill(control, signal.SIGCONT))
        self.d.write_fake(f"gpu 0 GPU-fake-0000 85899345920\nproc 0 {p.pid} {4 << 30}\n")
        wait_value(lambda: "to be killed once its MPS client is ended" in self.d.read_log(),
                 "the audit's decision")
        ps = subprocess.run([KAIROS, "ps"], capture_output=True, text=True, timeout=30,
                            env={**os.environ, "KAIROS_SOCKET": self.d.socket})
        self.assertEqual(ps.returncode, 0, ps.stderr)
        self.assertIsNone(p.poll(), "kairosd answered only after the kill: its loop waited")
        self.assertEqual(p.wait(10), -signal.SIGKILL)
        log = wait_value(lambda: (lambda t: t if "killed (audit action kill)" in t else None)(
            self.d.read_log()), "the kill's line")
        self.assertIn(f"audit: pid {p.pid} of tenant train: its MPS client could not be ended "
                      "first (terminate_client to the control daemon of fault domain infer: no "
                      "answer within 2000 ms)", log)
        p.stdin.close()

    def test_a_tenant_that_stalls_its_daemon_holds_at_most_8_kills_waiting(self):
        """Nine members over the quota, their domain's control daemon stopped by their
        own user: eight kills wait for terminate_client, the ninth is at once (the bound
        per tenant, so that one tenant cannot take every waiting slot), and all nine
        end."""
        here = os.path.dirname(os.path.abspath(__file__))
        procs = []
        for _ in range(9):
            p = subprocess.Popen([sys.executable, "-c", ROUTED_MEMBER, self.d.socket, "train",
                                  here], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 text=True)
            self.addCleanup(p.kill)
            procs.append(p)
            self.assertEqual(line_of(p), "ready")
        wait_value(self.server_pid, "the stand-in's server")
        control = Space.control_pid(self, f"infer@{os.getuid()}")
        os.kill(control, signal.SIGSTOP)
        self.addCleanup(lambda: os.kill(control, signal.SIGCONT))
        self.d.write_fake("gpu 0 GPU-fake-0000 85899345920\n" +
                          "".join(f"proc 0 {p.pid} {4 << 30}\n" for p in procs))
        for p in procs:
            self.assertEqual(p.wait(10), -signal.SIGKILL)
        log = self.d.read_log()
        self.assertEqual(log.count("to be killed once its MPS client is ended"), 8)
        self.assertEqual(log.count("could not be ended first (8 ends of tenant train wait for "
                                   "their MPS clients already)"), 1)
        for p in procs:
            p.stdin.close()


ARMED = r"""
import ctypes, os, signal, sys
mode = sys.argv[1]
if mode == "own":  # the application's own handler, set before its first GPU use
    signal.signal(signal.SIGTERM, lambda *_: (print("own handler", flush=True), os._exit(0)))
g = ctypes.CDLL(None).getenv
g.restype = ctypes.c_char_p
print(g(b"CUDA_MPS_PIPE_DIRECTORY").decode(), flush=True)  # as libcuda asks: routed
if mode == "fork":
    child = os.fork()
    if child == 0:
        sys.stdin.read()
        os._exit(0)
    print(child, flush=True)
print("ready", flush=True)
sys.stdin.read()
"""


def catches_sigterm(pid):
    """Whether process pid catches SIGTERM (its SigCgt in /proc/PID/status)."""
    with open(f"/proc/{pid}/status") as f:
        mask = next(int(l.split()[1], 16) for l in f if l.startswith("SigCgt:"))
    return bool(mask & (1 << (signal.SIGTERM - 1)))


def ended(pid):
    """Whether process pid has exited (a zombie its parent has not reaped, or gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


class SoftEnd(unittest.TestCase):
    """A job scheduler's SIGTERM to a member of a fault domain (Slurm and Kubernetes end
    jobs so): the shim catches it where the application left SIGTERM to its default
    action, kairosd ends the member's MPS client (terminate_client to its domain's
    control daemon) and then sends SIGTERM again, which ends the process, so that its
    end cannot fault the domain's other clients. An application's own handler stays
    its own, a forked child is not caught, and a member can end only itself."""

    control_pid = Space.control_pid

    def setUp(self):
        Space.start(self)

    def tearDown(self):
        Space.tearDown(self)

    def control_log(self):
        try:
            return open(os.path.join(self.root, f"infer@{os.getuid()}", "log",
                                     "control.log")).read()
        except FileNotFoundError:
            return ""

    def armed(self, mode, tenant="train"):
        p = subprocess.Popen([PYTHON, "-c", ARMED, mode], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True,
                             env=Space.env(self, KAIROS_TENANT=tenant))
        self.addCleanup(lambda: (p.kill(), p.wait()))
        self.assertEqual(line_of(p), Space.pipe(self, "infer"))
        return p

    def server(self):
        return wait_value(lambda: next((l.split()[-1] for l in self.control_log().splitlines()
                                      if "server pid" in l), None), "the stand-in's server")

    def test_the_mps_client_is_ended_before_the_process(self):
        p = self.armed("default")
        self.assertEqual(line_of(p), "ready")
        self.assertTrue(catches_sigterm(p.pid), "the shim did not catch SIGTERM")
        server = self.server()
        os.kill(p.pid, signal.SIGTERM)
        self.assertEqual(p.wait(10), -signal.SIGTERM)  # ended by SIGTERM, as it asked
        self.assertIn(f"command: terminate_client {server} {p.pid}", self.control_log())
        wait_value(lambda: f"tenant train: pid {p.pid} ends at its SIGTERM after its MPS client "
                 "(terminate_client), sparing fault domain infer" in self.d.read_log(),
                 "kairosd's line")

    def test_the_applications_own_handler_stays_its_own(self):
        p = self.armed("own")
        self.assertEqual(line_of(p), "ready")
        os.kill(p.pid, signal.SIGTERM)
        self.assertEqual(line_of(p), "own handler")
        self.assertEqual(p.wait(10), 0)
        self.assertNotIn("terminate_client", self.control_log())

    def test_a_forked_child_is_not_caught_and_ends_alone(self):
        p = self.armed("fork")
        child = int(line_of(p))
        self.assertEqual(line_of(p), "ready")
        self.assertTrue(catches_sigterm(p.pid))
        # the child puts the default back in fork (pthread_atfork), which may not have
        # run yet when the parent names it
        wait_value(lambda: not catches_sigterm(child), "the child to leave SIGTERM as it was")
        os.kill(child, signal.SIGTERM)
        wait_value(lambda: ended(child), "the child's end")
        self.assertIsNone(p.poll(), "the child's SIGTERM ended its parent")
        self.assertNotIn("terminate_client", self.control_log())

    def raw_member(self, tenant):
        """A member speaking the protocol itself (no shim), routed like libcuda's."""
        here = os.path.dirname(os.path.abspath(__file__))
        program = ROUTED_MEMBER.rsplit("sys.stdin.read()", 1)[0] + ENDINGS
        p = subprocess.Popen([sys.executable, "-c", program, self.d.socket, tenant, here],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.addCleanup(lambda: (p.kill(), p.wait()))
        return p

    def test_a_member_of_no_domain_asks_in_vain(self):
        p = self.raw_member("plain")
        self.assertEqual(line_of(p), "ready")
        p.stdin.write("3\n")
        p.stdin.flush()
        self.assertEqual(line_of(p), "sent")
        wait_value(lambda: f"tenant plain: pid {p.pid} asked that its MPS client be ended "
                 "before its SIGTERM; not done (it is in no fault domain)" in self.d.read_log(),
                 "kairosd's refusal")
        self.assertIsNone(p.poll(), "kairosd signalled a member of no fault domain")
        self.assertNotIn("terminate_client", self.control_log())
        # all three read ("sent" comes after a reply on the same connection): one line,
        # not three (a repeated request fills no log)
        self.assertEqual(self.d.read_log().count(f"pid {p.pid} asked that its MPS client"), 1)

    def test_endings_repeated_end_the_client_once_and_only_the_sender(self):
        p = self.raw_member("train")
        bystander = self.raw_member("serve")  # same domain, same uid
        self.assertEqual(line_of(p), "ready")
        self.assertEqual(line_of(bystander), "ready")
        server = self.server()
        p.stdin.write("20\n")
        p.stdin.flush()
        self.assertEqual(p.wait(10), -signal.SIGTERM)
        log = self.control_log()
        self.assertEqual(log.count(f"command: terminate_client {server} {p.pid}"), 1, log)
        self.assertNotIn(f" {bystander.pid}\n", log)
        self.assertIsNone(bystander.poll())

    def test_a_flood_of_endings_is_held_to_the_tenants_rate(self):
        # as the attacker: 24 members of one tenant ask at once; each ask would make
        # kairosd fork a control client, and at most 16 a second are heard
        members = [self.raw_member("train") for _ in range(24)]
        for p in members:
            self.assertEqual(line_of(p), "ready")
        self.server()
        for p in members:
            p.stdin.write("1\n")
        for p in members:
            p.stdin.flush()
        for p in members:  # kairosd has read each one's ENDING
            self.assertEqual(line_of(p), "sent")
        log = self.d.read_log()
        self.assertIn("tenant train asked for 16 ends in the last second already", log)
        refused = [p for p in members if f"pid {p.pid} asked that its MPS client" in log]
        self.assertGreaterEqual(len(refused), 24 - 16, log)
        ending = [p for p in members if p not in refused]
        for p in ending:
            self.assertEqual(p.wait(10), -signal.SIGTERM)
        self.assertLessEqual(self.control_log().count("command: terminate_client"), 16)
        self.assertTrue(all(p.poll() is None for p in refused), "a refused member was ended")


# ROUTED_MEMBER then: sends as many ENDINGs as the line it reads says, at once, then a
# ROUTE whose reply says that kairosd has read them all (one connection, read in order).
ENDINGS = r"""
n = int(sys.stdin.readline())
for _ in range(n):
    c.send(kp._C["KAIROS_MSG_ENDING"], kp.body("ending"))
c.request(kp._C["KAIROS_MSG_ROUTE"], kp.body("route"))
print("sent", flush=True)
sys.stdin.read()
"""


class Strangers(unittest.TestCase):
    """A client of a domain's MPS server that is no member of the domain (it reached the
    server around the shim's routing) is reported, once, and its MPS client ended with
    terminate_client (space: strangers: end, the default; report only logs it); the
    domain's members are neither."""
    STRANGERS = ""

    def setUp(self):
        self.port = harness.free_port()
        self.d = kp.Daemon(KAIROSD, TENANTS, gpus=1,
                           extra=f"space:\n  mps_control: {os.path.abspath(STAND_IN)}\n"
                                 f"  client_check_ms: 100\n{self.STRANGERS}"
                                 f"metrics: 127.0.0.1:{self.port}\n").start()
        self.root = os.path.join(os.path.dirname(self.d.socket), "mps")
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            p.kill()
            p.wait()
        self.assertEqual(self.d.stop(), 0)
        for entry in os.listdir(self.root) if os.path.isdir(self.root) else []:
            Space.control_pid(self, entry, kill=True)

    def control_log(self):
        path = os.path.join(self.root, f"infer@{os.getuid()}", "log", "control.log")
        return open(path).read() if os.path.exists(path) else ""

    def strangers_counted(self):
        """kairos_space_strangers_total's samples: {event: value}."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
            text = r.read().decode()
        return {m.group(1): float(m.group(2)) for m in re.finditer(
            r'^kairos_space_strangers_total\{event="(\w+)"\} (\S+)$', text, re.M)}

    def test_a_stranger_among_the_clients_is_reported_once(self):
        member, plain, stranger = self.clients()
        log = self.d.read_log()
        self.assertEqual(log.count(f"pid {stranger.pid} (sleep) is a client"), 1)
        reports = [l for l in log.splitlines() if "is a client of the MPS server" in l]
        self.assertTrue(any(f"pid {plain.pid} (" in l for l in reports))  # no domain's
        self.assertFalse(any(f"pid {member.pid} (" in l for l in reports))  # the domain's
        # ended: its MPS client and nothing else of it (no signal), and no member's
        server = int(open(os.path.join(self.pipe, "server.pid")).read())
        for p in (stranger, plain):
            wait_value(lambda p=p: f"command: terminate_client {server} {p.pid}"
                     in self.control_log(), f"terminate_client of pid {p.pid}")
            wait_value(lambda p=p: f"space: pid {p.pid} (" in self.d.read_log() and
                     "its MPS client was ended" in self.d.read_log(), "the end said")
        self.assertNotIn(f"terminate_client {server} {member.pid}", self.control_log())
        self.assertIsNone(stranger.poll())  # alive: only its GPU contexts end
        wait_value(lambda: open(os.path.join(self.pipe, "clients")).read().split()
                 == [str(member.pid), "not-a-pid"], "the stand-in to drop them")
        harness.pass_time(0.5, "a few more checks: nothing more to end")
        self.assertEqual(self.control_log().count(f"terminate_client {server} {stranger.pid}"),
                         1)
        self.assertEqual(self.strangers_counted(), {"found": 2, "ended": 2})

    def clients(self):
        """A member of the domain, a member of a tenant of no domain and a process of no
        tenant, all three on the domain's server's client list; once the stranger is
        reported."""
        here = os.path.dirname(os.path.abspath(__file__))
        member = subprocess.Popen([sys.executable, "-c", ROUTED_MEMBER, self.d.socket, "train",
                                   here], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True)
        self.procs.append(member)
        self.assertEqual(line_of(member), "ready")
        plain = subprocess.Popen([sys.executable, "-c", ROUTED_MEMBER, self.d.socket, "plain",
                                  here], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 text=True)  # a member, of another tenant and no domain
        self.procs.append(plain)
        self.assertEqual(line_of(plain), "ready")
        stranger = subprocess.Popen(["sleep", "60"])
        self.procs.append(stranger)
        self.pipe = os.path.join(self.root, f"infer@{os.getuid()}", "pipe")
        with open(os.path.join(self.pipe, "clients.new"), "w") as f:
            f.write(f"{member.pid}\n{plain.pid}\n{stranger.pid}\nnot-a-pid\n")
        os.rename(os.path.join(self.pipe, "clients.new"), os.path.join(self.pipe, "clients"))
        wait_value(lambda: f"pid {stranger.pid} (sleep) is a client of the MPS server of fault "
                 "domain infer but no member of the domain" in self.d.read_log(),
                 "kairosd to report the stranger")
        harness.pass_time(0.5, "a few more checks (client_check_ms 100): reported once only")
        return member, plain, stranger


class StrangersReported(Strangers):
    """space: strangers: report: the stranger is reported once and keeps its client."""
    STRANGERS = "  strangers: report\n"

    def test_a_stranger_among_the_clients_is_reported_once(self):
        member, plain, stranger = self.clients()
        log = self.d.read_log()
        self.assertEqual(log.count(f"pid {stranger.pid} (sleep) is a client"), 1)
        self.assertIn("it shares that domain's fate (space: strangers: report)", log)
        self.assertNotIn("terminate_client", self.control_log())
        self.assertNotIn("its MPS client was ended", log)
        self.assertEqual(self.strangers_counted(), {"found": 2, "ended": 0})


# A member of tenant argv[2] that asks its route, holds 1 MiB on GPU 0 when argv[4] is
# "hold", then waits for its stdin to close.
ROUTED_HOLDER = r"""
import os, sys
sys.path.insert(0, sys.argv[3])
import kairos_proto as kp
c = kp.Client(sys.argv[1])
c.request(kp.HELLO, kp.hello_body(sys.argv[2], os.getpid(), None,
                                  kp._C["KAIROS_HELLO_SPACE"]))
t, _ = c.request(kp._C["KAIROS_MSG_ROUTE"], kp.body("route"))
assert t == kp._C["KAIROS_MSG_ROUTED"], t
if sys.argv[4] == "hold":
    assert c.charge(0, 1 << 20, 1)[0]
    c.commit(0, 1, True, 1 << 20, 1 << 20)
print("ready", flush=True)
sys.stdin.read()
"""


class FaultRecoveryBase(unittest.TestCase):
    """kairosd with the stand-in control daemon, a kernel log the test writes, client
    checks every 100 ms and space: fault_recovery_ms: RECOVERY_MS."""
    RECOVERY_MS = 400

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kairos-recovery-")
        fifo = os.path.join(self.tmp, "kmsg")
        os.mkfifo(fifo, 0o600)
        self.d = kp.Daemon(KAIROSD, TENANTS, gpus=1,
                           fake="gpu 0 GPU-fake-0000 85899345920\npci 0 0000:65:00\n",
                           extra=f"space:\n  mps_control: {os.path.abspath(STAND_IN)}\n"
                                 f"  client_check_ms: 100\n"
                                 f"  fault_recovery_ms: {self.RECOVERY_MS}\n"
                                 f"kernel_log: {fifo}\n").start()
        self.writer = os.open(fifo, os.O_WRONLY)
        self.root = os.path.join(os.path.dirname(self.d.socket), "mps")
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            p.stdin.close()
            p.wait(10)
        os.close(self.writer)
        self.assertEqual(self.d.stop(), 0)
        for entry in os.listdir(self.root) if os.path.isdir(self.root) else []:
            Space.control_pid(self, entry, kill=True)

    def member(self, tenant, hold):
        here = os.path.dirname(os.path.abspath(__file__))
        p = subprocess.Popen([sys.executable, "-c", ROUTED_HOLDER, self.d.socket, tenant, here,
                              "hold" if hold else "none"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
        self.procs.append(p)
        self.assertEqual(line_of(p), "ready")
        return p

    def set_clients(self, *procs):
        pipe = os.path.join(self.root, f"infer@{os.getuid()}", "pipe")
        with open(os.path.join(pipe, "clients.new"), "w") as f:
            f.write("".join(f"{p.pid}\n" for p in procs))
        os.rename(os.path.join(pipe, "clients.new"), os.path.join(pipe, "clients"))
        return int(open(os.path.join(pipe, "server.pid")).read())

    def control_log(self):
        path = os.path.join(self.root, f"infer@{os.getuid()}", "log", "control.log")
        return open(path).read() if os.path.exists(path) else ""

    def fault(self, named):
        """A fault report naming named; the sentence kairosd logs once it has noted it."""
        os.write(self.writer, f"NVRM: Xid (PCI:0000:65:00): 31, pid={named.pid}, "
                              "name=python3, MMU Fault\n".encode())
        noted = "lost their work to the fault; those still clients"
        wait_value(lambda: noted in self.d.read_log(), "kairosd to note the fault's clients")
        return noted


class FaultRecovery(FaultRecoveryBase):
    """After a fault of a domain's MPS server MPS takes no new client of it until every
    client the fault cost its work has exited. Those that run on past space:
    fault_recovery_ms have their MPS clients ended (terminate_client, no signal); one
    that exited, a member the fault did not touch (no memory on the GPU) and anything
    before the grace are left alone."""

    def test_the_clients_left_running_are_ended_after_the_grace(self):
        train, serve = self.member("train", True), self.member("serve", True)
        untouched = self.member("train", False)  # no memory on the GPU: the fault spared it
        server = self.set_clients(train, serve, untouched)
        noted = self.fault(train)
        self.set_clients(train, untouched)  # serve exited by itself, as most do
        wait_value(lambda: f"command: terminate_client {server} {train.pid}" in
                   self.control_log(), "terminate_client of the client left running")
        ended = f"space: pid {train.pid} (python3) of tenant train: its MPS client was ended"
        wait_value(lambda: ended in self.d.read_log(), "the end said")
        log = self.d.read_log().splitlines()
        stamp = lambda text: datetime.datetime.strptime(  # noqa: E731
            next(l for l in log if text in l)[:23], "%Y-%m-%d %H:%M:%S.%f")
        self.assertGreaterEqual((stamp(ended) - stamp(noted)).total_seconds(),
                                self.RECOVERY_MS / 1000)
        harness.pass_time(0.5, "a few more checks: nothing more to end")
        control = self.control_log()
        self.assertEqual(control.count("terminate_client"), 1, control)
        self.assertIsNone(train.poll())  # alive: only its MPS client ended, no signal
        self.assertIn("(MMU Fault)", "\n".join(log))

    def test_a_repeat_of_the_same_event_notes_nothing_more(self):
        train, serve = self.member("train", True), self.member("serve", True)
        server = self.set_clients(train, serve)
        self.fault(train)
        os.write(self.writer, f"NVRM: Xid (PCI:0000:65:00): 43, pid={serve.pid}, "
                              "name=python3, Ch 00000010\n".encode())
        wait_value(lambda: "the same event as the report before" in self.d.read_log(),
                   "the repeat read")
        for p in (train, serve):
            wait_value(lambda p=p: f"terminate_client {server} {p.pid}" in self.control_log(),
                       f"terminate_client of pid {p.pid}")
        harness.pass_time(0.5, "a few more checks")
        self.assertEqual(self.control_log().count("terminate_client"), 2)
        self.assertEqual(self.d.read_log().count("lost their work to the fault; those"), 1)


class FaultRecoveryOff(FaultRecoveryBase):
    """space: fault_recovery_ms: 0: a fault's clients are never ended by kairosd."""
    RECOVERY_MS = 0

    def test_the_clients_a_fault_left_are_never_ended(self):
        train, serve = self.member("train", True), self.member("serve", True)
        self.set_clients(train, serve)
        os.write(self.writer, f"NVRM: Xid (PCI:0000:65:00): 31, pid={train.pid}, "
                              "name=python3, MMU Fault\n".encode())
        wait_value(lambda: "lost their work" in self.d.read_log(), "the fault read")
        harness.pass_time(1.0, "ten client checks: nothing is ended")
        self.assertNotIn("terminate_client", self.control_log())
        self.assertNotIn("those still clients", self.d.read_log())


class PlainNames(unittest.TestCase):
    """The shim exports getenv (for the CUDA_MPS_* names above); every other name gets
    what glibc's getenv gives: names that are prefixes of others, one character long,
    with an empty value, with '=' in them, empty, and not there. No kairosd: the shim
    answers these alone."""

    ENV = {"A": "1", "AB": "2", "ABC": "", "PATHX": "x", "B": "b=c", "ZZ": "last"}
    NAMES = ["A", "AB", "ABC", "ABCD", "PATH", "PATHX", "PATHXY", "B", "B=", "A=1", "",
             "Z", "ZZ", "ZZZ", "X" * 300]

    def answers(self, preload):
        code = ("import ctypes, json, sys\n"
                "g = ctypes.CDLL(None).getenv; g.restype = ctypes.c_char_p\n"
                "print(json.dumps([None if (v := g(n.encode())) is None else v.decode()"
                " for n in json.loads(sys.argv[1])]))\n")
        env = dict(self.ENV, PATH=os.environ.get("PATH", "/usr/bin"),
                   ASAN_OPTIONS="detect_leaks=0:verify_asan_link_order=0")  # python's leaks
        if preload:
            env["LD_PRELOAD"] = preload
        out = subprocess.run([PYTHON, "-c", code, json.dumps(self.NAMES)], env=env,
                             capture_output=True, text=True, timeout=60, check=True)
        return json.loads(out.stdout.splitlines()[-1])

    def test_answers_as_glibc(self):
        plain = self.answers(ASAN_FIRST)
        self.assertEqual(plain[:4], ["1", "2", "", None])  # glibc's own, as a check
        self.assertEqual(self.answers(" ".join(p for p in (ASAN_FIRST, SHIM) if p)), plain)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
