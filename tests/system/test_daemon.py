#!/usr/bin/env python3
"""kairosd end to end, without root or GPU: a tenant of several client processes
sharing one quota with refusal at the exact byte; hostile messages never crash the
daemon; a SIGKILLed client's memory is released within a second; a restart with
reattaching clients leaves the ledger consistent; TENANT_SET refused to a
non-administrator; kairos ps --json; kairos run's environment; the audit with the
fake GPU backend reporting (and killing) an unregistered process; compute policies
of the configuration and of tenants created at run time as TIME_POLICY, the 100 %
rule, run-time policies kept in the state file, and the time shares kairos ps
--json and kairos top show.
Usage: test_daemon.py KAIROSD_BINARY KAIROS_BINARY"""
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kairos_proto as kp  # noqa: E402
from harness import hold_still, pass_time, wait_for  # noqa: E402

KAIROSD, KAIROS = sys.argv[1], sys.argv[2]
GiB = kp.GiB
TENANTS = ("  - name: alice\n    memory: { 0: 8G, 1: 1G }\n"
           "  - name: bob\n    memory: { 0: 4096 }\n")


def child_client(sock_path, tenant, held=None, reattach=False):
    """A separate process that registers, reports, then waits for commands on a pipe:
    'charge GPU BYTES TOKEN' / 'commit GPU TOKEN OK RES ACT' / 'release GPU BYTES' / 'exit'."""
    r, w = os.pipe()
    r2, w2 = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        os.close(r2)
        code = 0
        try:
            c = kp.Client(sock_path)
            c.hello(tenant, held=held, reattach=reattach)
            os.write(w2, b"ready\n")
            f = os.fdopen(r)
            for line in f:
                cmd = line.split()
                if cmd[0] == "charge":
                    g = c.charge(int(cmd[1]), int(cmd[2]), int(cmd[3]))
                    os.write(w2, b"granted\n" if g[0] else b"refused\n")
                elif cmd[0] == "commit":
                    c.commit(int(cmd[1]), int(cmd[2]), cmd[3] == "1", int(cmd[4]), int(cmd[5]))
                    c.ps()  # a round trip so the commit is applied when we answer
                    os.write(w2, b"done\n")
                elif cmd[0] == "release":
                    c.release(int(cmd[1]), int(cmd[2]))
                    c.ps()
                    os.write(w2, b"done\n")
                elif cmd[0] == "exit":
                    break
        except Exception as e:  # noqa: BLE001
            os.write(w2, f"error {e}\n".encode())
            code = 1
        os._exit(code)
    os.close(r)
    os.close(w2)
    return ChildClient(pid, os.fdopen(w, "w", buffering=1), os.fdopen(r2))


class ChildClient:
    def __init__(self, pid, to, frm):
        self.pid, self.to, self.frm = pid, to, frm
        line = self.frm.readline().strip()
        if line != "ready":
            raise RuntimeError(f"child client: {line}")

    def cmd(self, text):
        self.to.write(text + "\n")
        return self.frm.readline().strip()

    def charge(self, gpu, n, token=0):
        return self.cmd(f"charge {gpu} {n} {token}") == "granted"

    def close_pipes(self):
        for f in (self.to, self.frm):
            try:
                f.close()
            except OSError:
                pass

    def kill(self):
        self.close_pipes()
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)

    def exit(self):
        try:
            self.to.write("exit\n")
            self.to.flush()
        except BrokenPipeError:
            pass
        self.close_pipes()
        os.waitpid(self.pid, 0)


class DaemonCase(unittest.TestCase):
    tenants = TENANTS
    admins = None
    fake = None
    extra = ""

    def setUp(self):
        self.d = kp.Daemon(KAIROSD, self.tenants, admins=self.admins, fake=self.fake,
                           extra=self.extra)
        self.d.start()
        self.children = []

    def tearDown(self):
        for ch in self.children:
            try:
                ch.kill()
            except (ProcessLookupError, ChildProcessError):
                pass
        self.assertEqual(self.d.stop_after(self), 0)

    def child(self, tenant, **kw):
        ch = child_client(self.d.socket, tenant, **kw)
        self.children.append(ch)
        return ch

    def ps(self):
        return self.d.ps()


class SharedQuota(DaemonCase):
    def test_processes_share_one_quota_refused_at_the_byte(self):
        a, b, c = self.child("alice"), self.child("alice"), self.child("alice")
        self.assertTrue(a.charge(0, 3 * GiB, 1))
        self.assertTrue(b.charge(0, 3 * GiB, 1))
        self.assertFalse(c.charge(0, 2 * GiB + 1, 1))
        self.assertTrue(c.charge(0, 2 * GiB, 2))
        self.assertFalse(a.charge(0, 1, 2))
        ps = self.ps()["alice"]
        self.assertEqual(ps["held"][0], 8 * GiB)
        self.assertEqual(ps["refusals"][0], 2)
        self.assertEqual(ps["pids"], sorted([a.pid, b.pid, c.pid]))
        # commit a different actual size, undo another, release
        self.assertEqual(a.cmd(f"commit 0 1 1 {3 * GiB} {3 * GiB - 4096}"), "done")
        self.assertEqual(b.cmd(f"commit 0 1 0 {3 * GiB} 0"), "done")
        self.assertEqual(self.ps()["alice"]["held"][0], 5 * GiB - 4096)
        self.assertEqual(c.cmd(f"release 0 {GiB}"), "done")
        self.assertEqual(self.ps()["alice"]["held"][0], 4 * GiB - 4096)
        # GPU 1 has its own quota; bob is another tenant
        self.assertTrue(a.charge(1, GiB, 3))
        self.assertFalse(a.charge(1, 1, 4))
        bob = self.child("bob")
        self.assertTrue(bob.charge(0, 4096, 1))
        self.assertFalse(bob.charge(0, 1, 2))
        self.assertIn("tenant alice: refused", self.d.read_log())

    def test_unknown_tenant_and_charge_before_hello(self):
        c = self.d.client()
        with self.assertRaises(kp.KairosError) as e:
            c.hello("nobody")
        self.assertEqual(e.exception.code, kp.ERR_NO_TENANT)
        self.assertIn("kairos run", e.exception.message)
        with self.assertRaises(kp.KairosError) as e:
            c.charge(0, 1)
        self.assertEqual(e.exception.code, kp.ERR_NOT_REGISTERED)
        c.hello("alice")
        with self.assertRaises(kp.KairosError) as e:
            c.charge(5, 1)  # a GPU the node lacks
        self.assertEqual(e.exception.code, kp.ERR_INVALID)
        self.assertTrue(c.charge(0, 1)[0])
        c.close()


class Hostile(DaemonCase):
    def raw(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.settimeout(5)
        s.connect(self.d.socket)
        return s

    def expect_error_then_close(self, payload, code=None):
        s = self.raw()
        s.send(payload)
        data = s.recv(4096)
        self.assertEqual(kp.HDR.unpack_from(data)[2], kp.ERROR, payload[:32])
        if code is not None:
            self.assertEqual(kp.fields("error", data[kp.HDR.size:])["code"], code)
        self.assertEqual(s.recv(4096), b"")  # disconnected
        s.close()

    def test_hostile_messages_never_crash_the_daemon(self):
        good = self.child("alice")
        self.assertTrue(good.charge(0, GiB, 1))
        self.expect_error_then_close(b"garbage", kp.ERR_PROTOCOL)
        self.expect_error_then_close(b"\0" * 16, kp.ERR_PROTOCOL)
        self.expect_error_then_close(kp.pack(kp.PS, b"", 1)[:-1] + b"", kp.ERR_PROTOCOL)
        self.expect_error_then_close(kp.HDR.pack(kp.MAGIC, 99, kp.PS, 0, 1),
                                     kp.ERR_VERSION)
        self.expect_error_then_close(kp.pack(999), kp.ERR_PROTOCOL)
        self.expect_error_then_close(kp.pack(kp.GRANT, b"\0" * 24), kp.ERR_PROTOCOL)
        self.expect_error_then_close(kp.pack(kp.CHARGE, b"\0" * 23), kp.ERR_PROTOCOL)
        self.expect_error_then_close(kp.pack(kp.HELLO, kp.hello_body("alice")[:100]),
                                     kp.ERR_PROTOCOL)
        self.expect_error_then_close(kp.pack(kp.HELLO, b"\x00" * 8 + b"A" * 64 + b"\0" * 128),
                                     kp.ERR_PROTOCOL)  # name not terminated
        self.expect_error_then_close(kp.pack(kp.CHARGE, kp.body("charge", bytes=2**63, token=1)),
                                     kp.ERR_INVALID)
        self.expect_error_then_close(kp.pack(kp.COMMIT, kp.body("commit", ok=1, token=1, reserved=1,
                                                                actual=1)),
                                     kp.ERR_NOT_REGISTERED)
        self.expect_error_then_close(b"\xff" * 100000, kp.ERR_PROTOCOL)  # huge
        # a header whose size field lies
        self.expect_error_then_close(kp.HDR.pack(kp.MAGIC, kp.VERSION, kp.PS, 2**31, 1),
                                     kp.ERR_PROTOCOL)
        # truncated: the peer sends half a header and vanishes
        s = self.raw()
        s.send(b"KRO")
        s.close()
        # a flood of requests without reading the replies, then hang-up
        s = self.raw()
        s.setblocking(False)
        sent = 0
        try:
            for i in range(20000):
                s.send(kp.pack(kp.PS, b"", i))
                sent += 1
        except BlockingIOError:
            pass
        s.close()
        # many connections at once (a full backlog answers EAGAIN: try again)
        many = []
        def connect():
            try:
                many.append(self.raw())
                return True
            except BlockingIOError:
                return False
        for _ in range(200):
            wait_for(connect, timeout=1.0, step=0.002)
        self.assertEqual(len(many), 200)
        for m in many:
            m.close()
        # the daemon is alive and the good client still works
        self.assertTrue(self.d.alive())
        self.assertTrue(good.charge(0, GiB, 2))
        self.assertEqual(self.ps()["alice"]["held"][0], 2 * GiB)
        self.assertIn("malformed message", self.d.read_log())


class ConnectionBound(DaemonCase):
    extra = "max_connections: 4\n"

    def test_connections_beyond_the_bound_are_refused_politely(self):
        held = [kp.Client(self.d.socket) for _ in range(4)]
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.settimeout(30)  # a deadline: a loaded CI machine once took more than 5 s
        s.connect(self.d.socket)
        data = s.recv(4096)
        self.assertEqual(kp.HDR.unpack_from(data)[2], kp.ERROR)
        self.assertIn(b"too many connections", data)
        s.close()
        for c in held:
            c.close()
        self.assertTrue(wait_for(lambda: self._can_ps()))

    def _can_ps(self):
        try:
            self.ps()
            return True
        except (OSError, kp.KairosError):
            return False


class Death(DaemonCase):
    def test_sigkilled_client_released_within_a_second(self):
        victim = self.child("alice")
        other = self.child("alice")
        self.assertTrue(victim.charge(0, 5 * GiB, 1))   # never committed
        self.assertTrue(victim.charge(1, GiB, 2))
        self.assertTrue(other.charge(0, GiB, 1))
        t0 = time.monotonic()
        os.kill(victim.pid, signal.SIGKILL)
        released = wait_for(lambda: self.ps()["alice"]["held"] == [GiB, 0], timeout=2.0,
                            step=0.001)
        elapsed = time.monotonic() - t0
        victim.kill()
        self.children.remove(victim)
        self.assertTrue(released, self.ps())
        print(f"\n    death-release time: {elapsed * 1000:.1f} ms", file=sys.stderr)
        self.assertLess(elapsed, 1.0)
        self.assertEqual(self.ps()["alice"]["pids"], [other.pid])
        self.assertTrue(other.charge(0, 7 * GiB, 2))


class Restart(DaemonCase):
    def test_restart_with_reattach_keeps_the_ledger_consistent(self):
        # a run-time tenant (persisted) and a config tenant
        c = self.d.client()
        c.tenant_set("job", [2 * GiB, 0])
        c.close()
        a = self.child("alice")
        self.assertTrue(a.charge(0, 5 * GiB, 1))
        self.assertEqual(a.cmd(f"commit 0 1 1 {5 * GiB} {5 * GiB}"), "done")
        j = self.child("job")
        self.assertTrue(j.charge(0, 2 * GiB, 1))
        before = self.ps()
        self.assertEqual(self.d.stop(), 0)
        for ch in (a, j):
            ch.exit()
        self.children.clear()
        with open(self.d.state) as f:
            state = json.load(f)
        self.assertEqual([t["name"] for t in state["tenants"]], ["job"])
        self.d.start()
        # the processes reattach with what they hold (fresh processes stand in for them)
        ra = self.child("alice", held=[5 * GiB], reattach=True)
        rj = self.child("job", held=[2 * GiB], reattach=True)
        after = self.ps()
        for name in ("alice", "job"):
            self.assertEqual(after[name]["held"], before[name]["held"], name)
            self.assertEqual(after[name]["quota"], before[name]["quota"], name)
        self.assertEqual(after["alice"]["held"][0], 5 * GiB)  # not 10: nothing counted twice
        self.assertFalse(rj.charge(0, 1, 2))
        self.assertTrue(ra.charge(0, 3 * GiB, 2))
        self.assertFalse(ra.charge(0, 1, 3))
        # a second reattach of the same pid is refused
        c = kp.Client(self.d.socket)
        c.hello("alice")
        with self.assertRaises(kp.KairosError):
            kp.Client(self.d.socket).hello("alice", held=[GiB], reattach=True)
        c.close()
        self.assertIn("reattached", self.d.read_log())

    def test_corrupt_state_file_is_set_aside(self):
        self.d.stop()
        for garbage in (b"{\"version\": 1, \"tenants\": [", b"\x00\xff garbage",
                        b"{\"version\": 7, \"tenants\": [{\"name\": \"x\", \"quota\": {}}]}",
                        b"[]"):
            with open(self.d.state, "wb") as f:
                f.write(garbage)
            self.d.start()
            self.assertIn("alice", self.ps())
            self.assertTrue(any(n.startswith("state.json.corrupt-")
                                for n in os.listdir(self.d.dir)))
            self.assertIn("is corrupt", self.d.read_log())
            self.d.stop()
            for n in os.listdir(self.d.dir):
                if n.startswith("state.json.corrupt-"):
                    os.unlink(os.path.join(self.d.dir, n))
        self.d.start()

    def test_sighup_reload_keeps_old_config_on_error(self):
        with open(self.d.config, "a") as f:
            f.write("  - name: carol\n    memory: { 0: 1G }\n")
        self.d.proc.send_signal(signal.SIGHUP)
        self.assertTrue(wait_for(lambda: "carol" in self.ps()))
        with open(self.d.config, "a") as f:
            f.write("  - name: dave\n    memory: { 7: 1G }\n")
        self.d.proc.send_signal(signal.SIGHUP)
        self.assertTrue(wait_for(lambda: "previous configuration stays" in self.d.read_log()))
        self.assertNotIn("dave", self.ps())
        self.assertIn("GPU 7 does not exist", self.d.read_log())

    def test_sighup_refuses_compute_shares_above_100(self):
        with open(self.d.config) as f:
            before = f.read()
        try:
            with open(self.d.config, "a") as f:
                f.write("  - name: erin\n    compute: { 0: { share: 70% } }\n"
                        "  - name: fred\n    compute: { 0: { share: 40% } }\n")
            self.d.proc.send_signal(signal.SIGHUP)
            self.assertTrue(wait_for(
                lambda: "compute shares on GPU 0 add up to 110% (erin 70%, fred 40%)"
                in self.d.read_log()))
            self.assertTrue(wait_for(lambda: "the previous one stays in force" in self.d.read_log()))
            self.assertNotIn("erin", self.ps())
        finally:
            with open(self.d.config, "w") as f:
                f.write(before)


class NotAdmin(DaemonCase):
    admins = []  # root is always an administrator

    def test_tenant_set_refused_for_a_non_admin(self):
        if os.getuid() == 0:
            # run the client as nobody: the socket is 0666, the daemon sees uid 65534
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                try:
                    os.setgid(65534)
                    os.setuid(65534)
                    c = kp.Client(self.d.socket)
                    try:
                        c.tenant_set("alice", [100 * GiB])
                        os.write(w, b"granted")
                    except kp.KairosError as e:
                        os.write(w, f"{e.code} {e.message}".encode())
                finally:
                    os._exit(0)
            os.close(w)
            answer = os.read(r, 1000).decode()
            os.waitpid(pid, 0)
        else:
            c = self.d.client()
            try:
                c.tenant_set("alice", [100 * GiB])
                answer = "granted"
            except kp.KairosError as e:
                answer = f"{e.code} {e.message}"
        self.assertTrue(answer.startswith(f"{kp.ERR_PERMISSION} permission denied"), answer)
        self.assertEqual(self.ps()["alice"]["quota"][0], 8 * GiB)


class Cli(DaemonCase):
    def kairos(self, *args, env=None):
        e = dict(os.environ, KAIROS_SOCKET=self.d.socket, **self.d.shim_env())
        e.update(env or {})
        return subprocess.run([KAIROS, *args], capture_output=True, text=True, env=e, timeout=30)

    def test_ps_json_and_table(self):
        a = self.child("alice")
        self.assertTrue(a.charge(0, 3 * GiB, 1))
        self.assertFalse(a.charge(0, 6 * GiB, 2))
        r = self.kairos("ps", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        self.assertEqual(doc["gpus"], 2)
        alice = {t["name"]: t for t in doc["tenants"]}["alice"]
        self.assertEqual(alice["pids"], [a.pid])
        self.assertEqual(alice["gpus"][0], {"index": 0, "quota": 8 * GiB, "held": 3 * GiB,
                                            "refusals": 1})
        r = self.kairos("ps")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"alice\s+0\s+3\.00 GiB/8\.00 GiB\s+1\s+%d" % a.pid)
        r = self.kairos("ps", "--json", env={"KAIROS_SOCKET": "/nonexistent/k.sock"})
        self.assertEqual(r.returncode, 1)
        self.assertIn("kairosd is not running", json.loads(r.stdout)["error"])
        self.assertEqual(self.kairos("ps", "--bogus").returncode, 2)

    def test_run_sets_the_environment_and_creates_tenants(self):
        shim = os.path.join(self.d.dir, "libkairos.so")
        open(shim, "wb").close()
        env = {"KAIROS_SHIM": shim, "LD_PRELOAD": ""}
        r = self.kairos("run", "--tenant", "alice", "--", "env", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("KAIROS_TENANT=alice\n", r.stdout)
        self.assertIn(f"LD_PRELOAD={shim}\n", r.stdout)
        # an ad-hoc tenant with a generated name, limited to GPU 1
        r = self.kairos("run", "--mem", "512MiB", "--gpus", "1", "--", "env", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("CUDA_VISIBLE_DEVICES=1\n", r.stdout)
        name = [l.split("=", 1)[1] for l in r.stdout.splitlines()
                if l.startswith("KAIROS_TENANT=")][0]
        self.assertIn(f"tenant {name} created", r.stderr)
        # ephemeral: gone once its command has exited
        self.assertTrue(wait_for(lambda: name not in self.ps()), self.ps())
        # a named tenant created by run stays, with the quota on all GPUs
        r = self.kairos("run", "--tenant", "job2", "--mem", "1G", "--", "true", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.ps()["job2"]["quota"], [GiB, GiB])
        # exit codes are the command's own
        r = self.kairos("run", "--tenant", "alice", "--", "sh", "-c", "exit 7", env=env)
        self.assertEqual(r.returncode, 7)
        # errors
        r = self.kairos("run", "--tenant", "nobody", "--", "true", env=env)
        self.assertEqual(r.returncode, 1)
        self.assertIn("unknown tenant 'nobody'", r.stderr)
        # a percentage is kairosd's to resolve; without NVML it cannot
        r = self.kairos("run", "--mem", "80%", "--", "true", env=env)
        self.assertEqual(r.returncode, 1)
        self.assertIn("NVML", r.stderr)
        self.assertEqual(self.kairos("run", "--mem", "0%", "--", "true", env=env).returncode, 2)
        r = self.kairos("run", "--gpus", "5", "--mem", "1G", "--", "true", env=env)
        self.assertEqual(r.returncode, 2)
        # the command's shim registers where the node's settings say: kairos run may
        # not be told another daemon (issue 10)
        r = self.kairos("run", "--tenant", "alice", "--", "true",
                        env=dict(env, KAIROS_SOCKET="/nonexistent/k.sock"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("not the kairosd that CMD's shim registers with", r.stderr)
        gone = self.d.shim_env(socket="/nonexistent/k.sock")
        r = self.kairos("run", "--tenant", "alice", "--", "true",
                        env=dict(env, KAIROS_SOCKET="/nonexistent/k.sock", **gone))
        self.assertEqual(r.returncode, 1)
        self.assertIn("KAIROS_MEM=SIZE", r.stderr)
        self.assertEqual(self.kairos("run", "--tenant", "alice").returncode, 2)


FAKE_GPUS = "gpu 0 GPU-fake-0000 85899345920\ngpu 1 GPU-fake-0001 85899345920\n"


class Audit(DaemonCase):
    fake = FAKE_GPUS
    tenants = ("  - name: alice\n    memory: { 0: 8G, GPU-fake-0001: 50% }\n")
    extra = "audit: { interval_ms: 100, kill: false }\n"

    def test_fake_gpus_resolve_percent_and_uuid(self):
        self.assertEqual(self.ps()["alice"]["quota"], [8 * GiB, 40 * GiB])

    def test_unregistered_process_reported_and_over_quota(self):
        victim = subprocess.Popen(["sleep", "30"])
        a = self.child("alice")
        try:
            self.d.write_fake(FAKE_GPUS + f"proc 0 {victim.pid} 1073741824\n"
                              f"proc 0 {a.pid} {9 * GiB}\n")
            self.assertTrue(wait_for(lambda: f"pid {victim.pid} (sleep) uses GPU 0"
                                     in self.d.read_log()), self.d.read_log())
            self.assertTrue(wait_for(lambda: "above the tenant's quota" in self.d.read_log()))
            self.assertIn("not killed", self.d.read_log())
            hold_still(0.3, "a few audit passes: not killed, reported once")
            self.assertIsNone(victim.poll())
            self.assertEqual(self.d.read_log().count(f"pid {victim.pid} (sleep) uses"), 1)
        finally:
            victim.kill()
            victim.wait()


class PercentQuota(DaemonCase):
    """kairos run --mem N% is resolved by kairosd with each GPU's memory (the CLI
    needs no NVML)."""
    fake = FAKE_GPUS

    def test_percent_of_each_gpu(self):
        shim = os.path.join(self.d.dir, "libkairos.so")
        open(shim, "wb").close()
        env = dict(os.environ, KAIROS_SHIM=shim, LD_PRELOAD="", **self.d.shim_env())
        r = subprocess.run([KAIROS, "run", "--tenant", "pct", "--mem", "12.5%", "--gpus", "1",
                            "--", "true"], capture_output=True, text=True, env=env, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("12.5% of the GPU's memory", r.stderr)
        self.assertEqual(self.ps()["pct"]["quota"], [0, 85899345920 // 8])

    def test_sizes_need_a_unit_and_fit_the_gpu(self):
        shim = os.path.join(self.d.dir, "libkairos.so")
        open(shim, "wb").close()
        env = dict(os.environ, KAIROS_SHIM=shim, LD_PRELOAD="", **self.d.shim_env())

        def run(*args):
            return subprocess.run([KAIROS, "run", *args, "--", "true"], capture_output=True,
                                  text=True, env=env, timeout=30)
        # --mem 8 would be 8 bytes: refused before anything is asked of kairosd
        r = run("--tenant", "bare", "--mem", "8")
        self.assertEqual(r.returncode, 2)
        self.assertIn("a size needs a unit", r.stderr)
        self.assertNotIn("bare", self.ps())
        # more than the GPU has (80 GiB): kairosd refuses, naming what the GPU has
        r = run("--tenant", "huge", "--mem", "100G")
        self.assertEqual(r.returncode, 1)
        self.assertIn("more than its 80.0 GiB", r.stderr)
        self.assertNotIn("huge", self.ps())
        # an existing tenant's quota changed by run is said, with what it was
        self.assertEqual(run("--tenant", "job", "--mem", "8G").returncode, 0)
        r = run("--tenant", "job", "--mem", "1G")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("tenant job's quota on GPU 0 changed from 8.00 GiB to 1.00 GiB (lowered",
                      r.stderr)
        self.assertEqual(self.ps()["job"]["quota"], [GiB, GiB])


class AuditKill(DaemonCase):
    fake = FAKE_GPUS
    tenants = "  - name: alice\n    memory: { 0: 8G }\n"
    extra = "audit: { interval_ms: 100, kill: true }\n"

    def test_unregistered_process_killed(self):
        victim = subprocess.Popen(["sleep", "30"])
        try:
            self.d.write_fake(FAKE_GPUS + f"proc 0 {victim.pid} 1073741824\n")
            self.assertEqual(victim.wait(timeout=5), -signal.SIGKILL)
            # kairosd logs the kill just after it: the victim may be reaped first
            self.assertTrue(wait_for(lambda: "killed (audit action kill)" in self.d.read_log(),
                                     timeout=5), self.d.read_log())
        finally:
            if victim.poll() is None:
                victim.kill()
                victim.wait()


class TimeShare(DaemonCase):
    """Compute policies reach the member processes as TIME_POLICY: after WELCOME and
    on a reload; in time_mode timeslices, timeslices in the ratio of the shares."""
    fake = FAKE_GPUS
    extra = "time_mode: timeslices\n"
    tenants = ("  - name: capped\n    compute: { 0: { share: 30%, limit: 30% } }\n"
               "  - name: big\n    compute: { 0: { share: 60% }, 1: { share: 10% } }\n")

    def policy(self, c):
        t, _, body = c.recv()
        self.assertEqual(t, kp.TIME_POLICY)
        return kp.time_policy(body)

    def test_policy_after_welcome_and_reload(self):
        c = self.d.client()
        try:
            c.hello("capped")
            p = self.policy(c)
            self.assertEqual((p["gpu"], p["period_us"], p["phase_us"], p["duty_us"]),
                             (0, 100000, 0, 30000))
            self.assertGreater(p["epoch_ns"], 0)
            # NVML's coarse figures do not move a limit's window (docs/scheduler.md):
            # a tenant reported at 100 % keeps its 30 ms
            self.d.write_fake(FAKE_GPUS + f"util 0 {os.getpid()} 100\n")
            hold_still(0.5, "ticks that read the figure: the window does not move")
            # a reload with a new limit reaches the member at once
            with open(self.d.config) as f:
                text = f.read()
            with open(self.d.config, "w") as f:
                f.write(text.replace("share: 30%, limit: 30%", "share: 20%, limit: 50%"))
            self.d.proc.send_signal(signal.SIGHUP)
            r = self.policy(c)
            self.assertGreater(r["seq"], p["seq"])
            self.assertEqual((r["period_us"], r["phase_us"], r["duty_us"]), (100000, 0, 50000))
        finally:
            c.close()

    def test_timeslices_in_the_ratio_of_shares(self):
        c = self.d.client()
        try:
            c.hello("big")
            for gpu, ts in ((0, 2000), (1, 1000)):  # 60 % next to 30 %; alone
                p = self.policy(c)
                self.assertEqual((p["gpu"], p["timeslice_us"], p["period_us"]), (gpu, ts, 0))
        finally:
            c.close()


class Windows(DaemonCase):
    """time_mode windows: tenants that compete get complementary clock-aligned
    windows in the ratio of their shares; a tenant left without processes is idle at
    once and the other gets the whole GPU (no windows)."""
    fake = FAKE_GPUS
    extra = "time_mode: windows\n"
    tenants = ("  - name: a\n    compute: { 0: { share: 75% } }\n"
               "  - name: b\n    compute: { 0: { share: 25% } }\n")

    def test_windows_in_the_ratio_then_lent(self):
        c = self.d.client()
        try:
            c.hello("a")
            p = kp.time_policy(c.recv()[2])
            self.assertEqual((p["period_us"], p["phase_us"], p["duty_us"]), (100000, 0, 75000))
            # b has no process: at the next tick a is alone and is never paused
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                q = kp.time_policy(c.recv()[2])
                if q["period_us"] == 0:
                    break
            self.assertEqual(q["period_us"], 0)
            self.assertGreater(q["seq"], p["seq"])
        finally:
            c.close()


class DoNoHarm(DaemonCase):
    """The default time_mode, auto: until a tenant is seen short of its share, no
    tenant is paused and each keeps the driver's own timeslices (timeslice_us 0),
    whatever the shares; a limit is still a window."""
    fake = FAKE_GPUS
    tenants = ("  - name: a\n    compute: { 0: { share: 75% } }\n"
               "  - name: b\n    compute: { 0: { share: 25% } }\n"
               "  - name: capped\n    compute: { 0: { limit: 30% } }\n")

    def test_native_until_someone_is_short(self):
        clients = []
        try:
            for name in ("a", "b"):
                c = self.d.client()
                clients.append(c)
                c.hello(name)
                p = kp.time_policy(c.recv()[2])
                self.assertEqual((p["timeslice_us"], p["period_us"]), (0, 0), name)
            c = self.d.client()
            clients.append(c)
            c.hello("capped")
            p = kp.time_policy(c.recv()[2])
            self.assertEqual((p["period_us"], p["phase_us"], p["duty_us"]), (100000, 0, 30000))
        finally:
            for c in clients:
                c.close()


class ComputeFigures(DaemonCase):
    """kairos ps --json and kairos top --once show per tenant and GPU the compute
    policy, the target, what it was charged over the last period and the last minute
    (what the fake GPU reported it used, and at least its window when it had one),
    its pause window and its pauses."""
    fake = FAKE_GPUS
    tenants = ("  - name: capped\n    memory: { 0: 8G }\n"
               "    compute: { 0: { share: 30%, limit: 30% } }\n"
               "  - name: big\n"
               "    compute: { 0: { share: 60%, priority: latency }, "
               "1: { share: 10%, priority: batch } }\n"
               "  - name: memonly\n    memory: { 1: 1G }\n")

    def kairos(self, *args):
        env = dict(os.environ, KAIROS_SOCKET=self.d.socket)
        return subprocess.run([KAIROS, *args], capture_output=True, text=True, env=env,
                              timeout=30)

    def gpus(self):
        r = self.kairos("ps", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        return {t["name"]: t["gpus"] for t in json.loads(r.stdout)["tenants"]}

    def compute(self, tenant, gpu):
        return self.gpus()[tenant][gpu].get("compute")

    def util(self, capped_pct, big_pct):
        self.d.write_fake(FAKE_GPUS + f"util 0 {self.a.pid} {capped_pct}\n"
                          f"util 0 {self.b.pid} {big_pct}\n")

    def test_ps_json_and_top_once(self):
        self.a, self.b = self.child("capped"), self.child("big")
        self.assertTrue(self.a.charge(0, 3 * GiB, 1))
        self.util(25, 70)
        # capped has a window of 30 %: it is charged the whole window, though NVML
        # reports less (the GPU was its alone then); big is charged what it used
        self.assertTrue(wait_for(lambda: self.compute("capped", 0)["window"] == 0.3
                                 and self.compute("big", 0)["window"] == 0.7),
                        self.gpus())
        # the minute's average climbs to 70 % (periods before the first util line were 0)
        self.assertTrue(wait_for(lambda: self.compute("big", 0)["minute"] >= 0.5), self.gpus())
        g = self.gpus()
        capped, big0, big1 = g["capped"][0]["compute"], g["big"][0]["compute"], g["big"][1]["compute"]
        self.assertEqual({k: capped[k] for k in ("share", "limit", "priority", "target")},
                         {"share": 0.3, "limit": 0.3, "priority": "normal", "target": 0.3})
        # the limit is a window of 30 % of every 100 ms period
        self.assertEqual(capped["windowed"], {"duty_us": 30000, "period_us": 100000})
        self.assertGreater(capped["pauses"], 0)
        # its limit held it back, paused 70 % of each period (test_holds.py has more)
        hold = capped["hold"]
        self.assertEqual((hold["now"], hold["why"], hold["slices"]), ("limit", "limit", False))
        self.assertTrue(0.5 < hold["paused"] <= 0.7, hold)
        self.assertEqual(hold["reasons"]["limit"]["periods_total"], capped["pauses"])
        # big gets what capped's limit leaves; not windowed, never paused
        self.assertEqual(big0, {"share": 0.6, "limit": None, "priority": "latency",
                                "target": 0.7, "window": 0.7, "minute": big0["minute"],
                                "windowed": None, "pauses": 0, "hold": big0["hold"]})
        self.assertEqual(big0["hold"]["paused"], 0.0)
        self.assertLessEqual(big0["minute"], 0.7)
        # GPU 1: measured at 0, but big has a live process and is alone there: NVML's
        # figures do not tell idle from unsampled, so its target is the whole GPU
        self.assertEqual({k: big1[k] for k in ("share", "priority", "target", "window")},
                         {"share": 0.1, "priority": "batch", "target": 1.0, "window": 0.0})
        self.assertNotIn("compute", g["capped"][1])
        self.assertEqual([("compute" in x) for x in g["memonly"]], [False, False])
        self.assertEqual(g["capped"][0]["held"], 3 * GiB)
        # capped used more than its window (a pause landing late): charged what it
        # used; big used less: the last period follows at once, the minute remembers
        self.util(40, 50)
        self.assertTrue(wait_for(lambda: self.compute("capped", 0)["window"] == 0.4
                                 and self.compute("big", 0)["window"] == 0.5), self.gpus())
        later = self.compute("big", 0)
        self.assertGreater(later["minute"], 0.5)
        self.assertLess(later["minute"], 0.7)
        self.assertGreater(self.compute("capped", 0)["pauses"], capped["pauses"])
        self.check_top_once()

    def check_top_once(self):
        r = self.kairos("top", "--once")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(all(len(line) <= 80 for line in r.stdout.splitlines()), r.stdout)
        self.assertRegex(r.stdout, r"TENANT\s+TARGET\s+100MS\s+1MIN\s+SHARE\s+LIMIT\s+"
                                   r"MEMORY HELD/QUOTA\s+PROCS\n  capped\s+30\.0%")
        r = self.kairos("top", "--once", "-o", "tenant,pauses,prio")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"\n  TENANT\s+PAUSES\s+PRIO\n  capped\s+\d+\s+normal\n")
        r = self.kairos("top", "--once", "--wide")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout
        self.assertTrue(out.startswith("kairosd: 2 GPUs, 3 tenants, 2 with a compute policy\n"),
                        out)
        gpu0, gpu1 = out.split("\nGPU 0\n")[1].split("\nGPU 1\n")
        self.assertRegex(gpu0, r"TENANT\s+TARGET\s+100MS\s+1MIN\s+SHARE\s+LIMIT\s+PRIO\s+"
                               r"WINDOW\s+PAUSES\s+HOLD\s+WHY\s+MEMORY HELD/QUOTA\s+PROCS")
        # held back by its limit: paused 70 % of every period it had its window
        m = re.search(r"\n  capped\s+30\.0%\s+40\.0%\s+(\d+\.\d)%\s+30\.0%\s+30\.0%\s+normal\s+"
                      r"30\.0/100ms\s+(\d+)\s+70\.0%\s+limit\s+3\.00 GiB/8\.00 GiB\s+1\n", gpu0)
        self.assertIsNotNone(m, out)
        self.assertTrue(30.0 <= float(m.group(1)) < 40.0, out)
        self.assertGreater(int(m.group(2)), 0)
        m = re.search(r"\n  big\s+70\.0%\s+50\.0%\s+(\d+\.\d)%\s+60\.0%\s+none\s+latency\s+"
                      r"-\s+0\s+\S+\s+\S+\s+0 B/0 B\s+1\n", gpu0)
        self.assertIsNotNone(m, out)
        self.assertTrue(50.0 < float(m.group(1)) < 70.0, out)
        self.assertNotIn("memonly", gpu0)
        self.assertRegex(gpu1, r"\n  big\s+100\.0%\s+0\.0%\s+0\.0%\s+10\.0%\s+none\s+batch\s+-\s+0\s+")
        self.assertRegex(gpu1, r"\n  memonly(\s+-){10}\s+0 B/1\.00 GiB\s+0\n")
        self.assertNotIn("capped", gpu1)

    def test_ps_table_has_compute_columns(self):
        r = self.kairos("ps")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(all(len(line) <= 80 for line in r.stdout.splitlines()), r.stdout)
        self.assertRegex(r.stdout, r"TENANT\s+GPU\s+MEMORY HELD/QUOTA\s+REFUSED\s+SHARE\s+"
                                   r"TARGET\s+1MIN\s+PIDS\n")
        self.assertRegex(r.stdout, r"\nmemonly\s+1\s+0 B/1\.00 GiB\s+0(\s+-){3}\s+-\n")
        r = self.kairos("ps", "--columns", "tenant,share,prio")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^TENANT\s+SHARE\s+PRIO\n")
        self.assertRegex(r.stdout, r"\nbig\s+60\.0%\s+latency\n")
        r = self.kairos("ps", "-o", "tenant,nope")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown column 'nope'", r.stderr)
        r = self.kairos("ps", "--wide")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"TENANT\s+GPU\s+HELD\s+QUOTA\s+REFUSED\s+SHARE\s+LIMIT\s+"
                                   r"PRIO\s+TARGET\s+100MS\s+1MIN\s+WINDOW\s+PAUSES\s+HOLD\s+"
                                   r"WHY\s+PIDS")
        self.assertRegex(r.stdout, r"\nbig\s+0\s+0 B\s+0 B\s+0\s+60\.0%\s+none\s+latency\s")
        self.assertRegex(r.stdout, r"\nmemonly\s+1\s+0 B\s+1\.00 GiB\s+0(\s+-){10}\s+-\n")
        self.assertTrue(any(len(line) > 80 for line in r.stdout.splitlines()), r.stdout)

    def test_top_usage_and_errors(self):
        self.assertEqual(self.kairos("top", "--interval", "0").returncode, 2)
        self.assertEqual(self.kairos("top", "--interval", "x").returncode, 2)
        self.assertEqual(self.kairos("top", "--bogus").returncode, 2)
        self.assertEqual(self.kairos("top", "extra").returncode, 2)
        r = subprocess.run([KAIROS, "top", "--once", "--socket", "/nonexistent/k.sock"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertIn("kairosd is not running", r.stderr)
        # not a terminal: one plain frame, as with --once
        r = self.kairos("top")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.startswith("kairosd: 2 GPUs, 3 tenants"), r.stdout)

    def test_top_live_in_a_terminal(self):
        """The curses view draws the tenants, redraws cut to a smaller window when the
        terminal is resized, and q quits with status 0."""
        import fcntl
        import pty
        import select
        import termios

        def winsize(fd, rows, cols):
            fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

        env = dict(os.environ, KAIROS_SOCKET=self.d.socket, TERM="xterm")
        try:
            pid, fd = pty.fork()
        except OSError as e:
            self.skipTest(f"no pseudo-terminal: {e}")
        if pid == 0:
            winsize(0, 30, 132)
            os.execve(KAIROS, [KAIROS, "top", "--interval", "60"], env)

        def read_for(seconds):
            out, end = b"", time.monotonic() + seconds
            while time.monotonic() < end:
                if select.select([fd], [], [], 0.05)[0]:
                    try:
                        out += os.read(fd, 65536)
                    except OSError:
                        break
            return out

        try:
            first = read_for(1.5)
            self.assertIn(b"capped", first)
            self.assertIn(b"q quits", first)
            winsize(fd, 10, 40)  # the kernel sends SIGWINCH
            resized = read_for(1.0)
            # redrawn at once (the next refresh is a minute away), cut to 40 columns
            self.assertIn(b"kairos top - every 60.0 s", resized)
            self.assertNotIn(b"q quits", resized)
            os.write(fd, b"q")
            read_for(0.5)
            _, status = os.waitpid(pid, 0)
            self.assertEqual(os.waitstatus_to_exitcode(status), 0)
        finally:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            os.close(fd)


class ComputeUnmeasured(DaemonCase):
    """Without a GPU backend nothing is measured: the policy shows, the shares it got
    are unknown (null, "-"), not 0."""
    tenants = "  - name: capped\n    compute: { 0: { share: 30%, limit: 30% } }\n"

    def test_unknown_is_not_zero(self):
        env = dict(os.environ, KAIROS_SOCKET=self.d.socket)
        pass_time(0.3, "a few scheduler ticks (100 ms)")
        r = subprocess.run([KAIROS, "ps", "--json"], capture_output=True, text=True, env=env,
                           timeout=30)
        c = json.loads(r.stdout)["tenants"][0]["gpus"][0]["compute"]
        self.assertEqual((c["share"], c["limit"], c["window"], c["minute"], c["pauses"]),
                         (0.3, 0.3, None, None, 0))
        r = subprocess.run([KAIROS, "top", "--once", "--wide"], capture_output=True, text=True,
                           env=env, timeout=30)
        self.assertRegex(r.stdout, r"\n  capped\s+\d+\.\d%\s+-\s+-\s+30\.0%\s+30\.0%\s+normal\s")


class RuntimeCompute(DaemonCase):
    """Compute policies of tenants created at run time (TENANT_SET, kairos run
    --share/--limit/--priority): into the scheduler next to the configuration's,
    refused above 100 % per GPU, kept in the state file across a restart, a bad one
    in that file refused alone."""
    fake = FAKE_GPUS
    tenants = TimeShare.tenants  # GPU 0: capped 30 % (limit 30 %), big 60 %; GPU 1: big 10 %
    extra = TimeShare.extra      # timeslices: the policies are checked by their timeslice

    def policy(self, c):
        t, _, body = c.recv()
        self.assertEqual(t, kp.TIME_POLICY)
        return kp.time_policy(body)

    def admin(self, tenant, quotas, compute=None, flags=0):
        c = self.d.client()
        try:
            c.tenant_set(tenant, quotas, flags=flags, compute=compute)
        finally:
            c.close()

    def kairos(self, *args):
        shim = os.path.join(self.d.dir, "libkairos.so")
        open(shim, "wb").close()
        env = dict(os.environ, KAIROS_SOCKET=self.d.socket, KAIROS_SHIM=shim, LD_PRELOAD="",
                   **self.d.shim_env())
        return subprocess.run([KAIROS, *args], capture_output=True, text=True, env=env,
                              timeout=30)

    def test_runtime_share_gets_its_timeslice(self):
        big = self.d.client()
        try:
            big.hello("big")
            self.assertEqual(self.policy(big)["timeslice_us"], 2000)  # 60 % next to 30 %
            self.assertEqual(self.policy(big)["timeslice_us"], 1000)  # GPU 1, alone
            self.admin("job", [GiB, GiB], {0: {"share": 10}, 1: {"share": 30}})
            # the scheduler took it at once: big's slice on GPU 0 follows the new smallest
            # share (on GPU 1 big's 10 % stays the smallest: no change, nothing sent)
            p = self.policy(big)
            self.assertEqual((p["gpu"], p["timeslice_us"]), (0, 6000))
            j = self.d.client()
            try:
                j.hello("job")
                p0, p1 = self.policy(j), self.policy(j)
                self.assertEqual((p0["gpu"], p0["timeslice_us"], p0["period_us"]), (0, 1000, 0))
                self.assertEqual((p1["gpu"], p1["timeslice_us"], p1["period_us"]), (1, 3000, 0))
                # a change reaches the member: latency on GPU 0; no policy on GPU 1 any more
                self.admin("job", [], {0: {"share": 10, "priority": "latency"}, 1: "clear"})
                got = {}
                while len(got) < 2:
                    p = self.policy(j)
                    got[p["gpu"]] = p
                self.assertEqual(got[0]["timeslice_us"], 8000)
                # KAIROS_TIME_LATENCY, KAIROS_TIME_REPORT (every policy asks for it) and,
                # beside a latency tenant, KAIROS_TIME_QUICK_WAKE
                self.assertEqual(got[0]["flags"], 1 | 2 | 4)
                self.assertEqual((got[1]["timeslice_us"], got[1]["period_us"]), (0, 0))
                self.assertGreater(got[1]["seq"], p1["seq"])
            finally:
                j.close()
            self.assertIn("tenant job: compute policy on GPU 0: share 10%, no limit, latency",
                          self.d.read_log())
        finally:
            big.close()

    def test_shares_above_100_refused_with_the_tenants_and_the_sum(self):
        with self.assertRaises(kp.KairosError) as e:
            self.admin("job", [GiB], {0: {"share": 20}})
        self.assertEqual(e.exception.code, kp.ERR_INVALID)
        self.assertEqual(e.exception.message,
                         "compute shares on GPU 0 add up to 110% (capped 30%, big 60%, job 20%): "
                         "at most 100% can be guaranteed; give job a smaller share there, or "
                         "lower another tenant's")
        self.assertNotIn("job", self.ps())  # nothing changed
        self.admin("job", [GiB], {0: {"share": 10}})  # exactly 100 %
        r = self.kairos("run", "--tenant", "job2", "--mem", "1G", "--share", "0.5%", "--", "true")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("compute shares on GPU 0 add up to 100.5% (capped 30%, big 60%, job 10%, "
                      "job2 0.5%)", r.stderr)
        self.assertNotIn("job2", self.ps())
        # on GPU 1 there is room; --gpus limits the policy to it
        r = self.kairos("run", "--tenant", "job2", "--mem", "1G", "--share", "50%", "--gpus", "1",
                        "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("tenant job2: compute share 50%, no limit, normal on GPUs 1", r.stderr)
        # out of range on the wire, and a configuration tenant: refused, saying what to do
        with self.assertRaises(kp.KairosError) as e:
            self.admin("job3", [GiB], {0: {"share": 150}})
        self.assertIn("compute policy on GPU 0 refused: share 150% is outside 0-100%",
                      e.exception.message)
        with self.assertRaises(kp.KairosError) as e:
            self.admin("job3", [GiB], {0: {"share": 20, "limit": 10}})
        self.assertIn("share 20% is above the limit 10%", e.exception.message)
        with self.assertRaises(kp.KairosError) as e:
            self.admin("big", [], {1: {"share": 20}})
        self.assertIn("tenant 'big' is declared in the configuration", e.exception.message)
        self.assertIn("reload kairosd", e.exception.message)
        # usage errors of kairos run
        r = self.kairos("run", "--tenant", "job", "--share", "140%", "--", "true")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--share 140%: expected share as a percentage from 0% to 100%", r.stderr)
        r = self.kairos("run", "--tenant", "nobody", "--share", "1%", "--", "true")
        self.assertEqual(r.returncode, 1)
        self.assertIn("add --mem SIZE", r.stderr)
        # an older kairos's 200-byte TENANT_SET is still understood (no compute change)
        c = self.d.client()
        try:
            body = kp.tenant_set_body("job", [2 * GiB])[:kp.TENANT_SET_SIZE_V0]
            self.assertEqual(c.request(kp.TENANT_SET, body)[0], kp.OK)
        finally:
            c.close()
        self.assertEqual(self.ps()["job"]["quota"], [2 * GiB, 0])
        self.assertTrue(self.d.alive())

    def test_ephemeral_tenant_policy_goes_with_it(self):
        big = self.d.client()
        try:
            big.hello("big")
            self.policy(big)
            self.policy(big)
            r = self.kairos("run", "--mem", "1G", "--share", "5%", "--gpus", "0", "--", "true")
            self.assertEqual(r.returncode, 0, r.stderr)
            first = self.policy(big)
            self.assertEqual((first["gpu"], first["timeslice_us"]), (0, 12000))  # 60 / 5
            back = self.policy(big)  # the tenant is gone with its command: back to 60 / 30
            self.assertEqual((back["gpu"], back["timeslice_us"]), (0, 2000))
        finally:
            big.close()

    def test_policy_survives_a_restart(self):
        r = self.kairos("run", "--tenant", "job", "--mem", "1G", "--share", "10%", "--priority",
                        "latency", "--gpus", "0", "--", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.admin("job", [], {1: {"share": 30, "limit": 50}})
        self.assertEqual(self.d.stop(), 0)
        with open(self.d.state) as f:
            job = {t["name"]: t for t in json.load(f)["tenants"]}["job"]
        self.assertEqual(job["compute"], {
            "0": {"share_ppm": 100000, "limit_ppm": 0, "priority": "latency"},
            "1": {"share_ppm": 300000, "limit_ppm": 500000, "priority": "normal"}})
        self.d.start()
        self.assertIn("1 tenant(s) created at run time restored", self.d.read_log())
        j = self.d.client()
        try:
            j.hello("job")
            p0, p1 = self.policy(j), self.policy(j)
            self.assertEqual((p0["gpu"], p0["timeslice_us"], p0["flags"]), (0, 8000, 1 | 2 | 4))
            self.assertEqual((p1["gpu"], p1["timeslice_us"]), (1, 3000))
            self.assertEqual(p1["period_us"], 100000)  # the 50 % limit: windows
            self.assertEqual(p1["duty_us"], 50000)
        finally:
            j.close()
        # still counted: another 1 % on GPU 0 is refused
        with self.assertRaises(kp.KairosError) as e:
            self.admin("more", [GiB], {0: {"share": 1}})
        self.assertIn("add up to 101%", e.exception.message)

    def test_reload_counts_the_runtime_shares(self):
        self.admin("job", [GiB], {0: {"share": 10}})
        with open(self.d.config, "a") as f:
            f.write("  - name: extra\n    compute: { 0: { share: 5% } }\n")
        self.d.proc.send_signal(signal.SIGHUP)
        self.assertTrue(wait_for(lambda: "previous configuration stays" in self.d.read_log()))
        self.assertIn("compute shares on GPU 0 add up to 105% (capped 30%, big 60%, extra 5%, "
                      "job 10%): at most 100% can be guaranteed, counting the tenants created at "
                      "run time", self.d.read_log())
        self.assertNotIn("extra", self.ps())

    def test_bad_policy_in_the_state_file_refused_alone(self):
        self.assertEqual(self.d.stop(), 0)
        state = {"version": 1, "tenants": [
            {"name": "job", "ephemeral": False, "quota": {"0": GiB, "1": GiB},
             "compute": {"0": {"share_ppm": 5000000}, "1": {"share_ppm": 300000}}},
            {"name": "over", "quota": {"0": 4096},
             "compute": {"0": {"share_ppm": 200000}}},  # 30 + 60 + 20 > 100 on GPU 0
            {"name": "junk", "quota": {"0": 4096}, "compute": "garbage"},
            {"name": "types", "quota": {"0": 4096},
             "compute": {"0": {"share_ppm": "ten", "priority": 3}, "9": {}}}]}
        with open(self.d.state, "w") as f:
            json.dump(state, f)
        self.d.start()
        self.assertTrue(self.d.alive())
        ps = self.ps()
        self.assertEqual(ps["job"]["quota"], [GiB, GiB])  # the rest of the tenant is kept
        for name in ("over", "junk", "types"):
            self.assertEqual(ps[name]["quota"], [4096, 0], name)
        self.assertFalse(any(n.startswith("state.json.corrupt-") for n in os.listdir(self.d.dir)))
        log = self.d.read_log()
        self.assertIn("tenant 'job': compute policy \"0\" refused: share 500% is outside 0-100%",
                      log)
        self.assertIn("tenant over: compute policy on GPU 0 (share 20%, no limit, normal) "
                      "refused: compute shares on GPU 0 add up to 110%", log)
        self.assertIn("tenant 'junk': \"compute\" is not an object", log)
        self.assertIn("tenant 'types': compute policy \"9\" refused", log)
        j = self.d.client()
        try:
            j.hello("job")
            p = self.policy(j)  # GPU 1's policy only: GPU 0's was refused
            self.assertEqual((p["gpu"], p["timeslice_us"]), (1, 3000))
        finally:
            j.close()
        # the refused share left room: over can be given 10 % again
        self.admin("over", [], {0: {"share": 10}})


class BadConfig(unittest.TestCase):
    def test_bad_config_refused_with_position(self):
        d = kp.Daemon(KAIROSD, "  - name: a\n    memory: { 0: 8GB }\n")
        r = subprocess.run([KAIROSD, "-c", d.config, "--check"], capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stderr, r"kairosd\.yaml:\d+:\d+: tenant 'a': '8GB'")
        d2 = kp.Daemon(KAIROSD, TENANTS)
        r = subprocess.run([KAIROSD, "-c", d2.config, "--check"], capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        shutil.rmtree(d.dir)
        shutil.rmtree(d2.dir)

    def test_sizes_without_units_or_beyond_the_gpu_are_warned_about(self):
        # a file keeps a bare number's documented meaning (bytes), saying to add a unit;
        # a quota beyond its GPU's memory stands (a file may serve GPUs of several sizes)
        # and is said to be never reached
        d = kp.Daemon(KAIROSD, "  - name: a\n    memory: { 0: 4096, 1: 100G }\n"
                               "audit: { overhead: 1 }\n")
        fake = os.path.join(d.dir, "gpus.txt")
        with open(fake, "w") as f:
            f.write(FAKE_GPUS)
        r = subprocess.run([KAIROSD, "-c", d.config, "--check", "--fake-gpu", fake],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stderr, r"kairosd\.yaml:\d+:\d+: tenant 'a': memory '4096' has no "
                                   r"unit and is read as 4096 bytes")
        self.assertRegex(r.stderr, r"kairosd\.yaml:\d+:\d+: audit overhead '1' has no unit")
        self.assertIn("tenant 'a': memory '100G' is more than GPU 1's 80.0 GiB", r.stderr)
        shutil.rmtree(d.dir)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
