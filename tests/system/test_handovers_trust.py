#!/usr/bin/env python3
"""Attacker tests for the hand-over table (issue 25, items 1 and 4): who may tell
kairosd that another process holds a process's NVIDIA files (FORKED, INHERITED), and
how many such edges a tenant may make it remember. kairosd runs with the scripted
GPU backend and the fake driver (its journal says what the "GPU" holds), which lists
no process: only the hand-overs kairosd verified keep a departed process's charge.
- a process in no tenant (nobody, a raw client of the protocol) reports thousands of
  its own children: every report is refused, and a tenant's fork hand-over still
  keeps its child's memory charged, within the quota;
- a tenant's member floods up to its tenant's share: the one past it is refused,
  another tenant's hand-over is still taken, and the flooding tenant's own fork
  fails closed (EAGAIN, the child killed: nothing left holding memory uncharged);
- INHERITED naming a pipe shared with a victim, from a non-member and from a member:
  refused, and the victim's memory is released when it exits.
Each assertion of a refusal failed on the code before (every report was taken).
Runs as root in CI: the attackers drop to nobody (uid 65534); as another user they
run as that user, which changes nothing here but who they are.
Usage: test_handovers_trust.py KAIROSD KAIROS SHIM FAKEDRV FAKEAPP"""
import functools
import json
import os
import re
import socket
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kairos_proto as kp  # noqa: E402
from harness import driver_holds, preload_env, wait_for  # noqa: E402

KAIROSD, KAIROS, SHIM, FAKEDRV, FAKEAPP = sys.argv[1:6]
env = functools.partial(preload_env, SHIM, FAKEDRV)
MiB = 1 << 20
PAGE = 2 * MiB
NOBODY = 65534
TENANT_SHARE = 1024  # HEIRS_TENANT_MAX (src/daemon/memory/heirs.h)
GPU = "gpu 0 GPU-fake-0000 85899345920\n"
TENANTS = ("  - name: team\n    memory: { 0: 64M }\n"
           "  - name: flood\n    memory: { 0: 64M }\n"
           "  - name: other\n    memory: { 0: 64M }\n    members: { users: [65534] }\n")

def drop_to_nobody():
    if os.getuid() == 0:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)


REAPED = set()


def reap(pid, go):
    """Tells the forked child pid to go (a byte on go, then closed) and reaps it;
    nothing when done already (a cleanup after the test did)."""
    if pid in REAPED:
        return
    REAPED.add(pid)
    os.write(go, b"x")
    os.close(go)
    os.waitpid(pid, 0)


def counts(line, prefix):
    assert line.startswith(prefix), line
    return {k: int(v) for k, v in re.findall(r"(\w+)=(-?\d+)", line)}


def driver_file(tag):
    """A stand-in for a file of the fake driver: a socket bound to the abstract name
    by which kairosd's scripted GPU backend knows the fake's files."""
    a, b = socket.socketpair()
    b.bind(f"\0kairos-fakedrv:test:{os.getpid()}:{tag}".encode())
    return a, b


def inherited_body(from_pid, fds, flags=kp.INHERITED_RECEIVED):
    return kp.body("inherited", from_pid=from_pid, flags=flags, n_fds=len(fds), fds=list(fds))


class HandoverTable(unittest.TestCase):
    def setUp(self):
        self.d = kp.Daemon(KAIROSD, tenants_yaml=TENANTS, gpus=1, fake=GPU).start()
        self.journal = os.path.join(self.d.dir, "fakedrv.journal")

    def tearDown(self):
        self.d.stop()
        log = self.d.read_log()
        self.assertNotIn("runtime error", log)
        self.assertNotIn("Sanitizer", log)

    def held(self, tenant):
        return sum(self.d.ps()[tenant]["held"])

    def flood(self, n, tenant=None, as_nobody=False):
        """A forked client (nobody when as_nobody) that joins tenant (None: none),
        forks n children which exit at once (zombies: still its children in /proc,
        as FORKED needs) and reports each (FORKED); it keeps them until the test
        ends. Returns how the reports were answered: {"ok": n} or {"CODE": n}, and
        "why": the first refusal's message."""
        out_r, out_w = os.pipe()
        end_r, end_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                if as_nobody:
                    drop_to_nobody()
                c = kp.Client(self.d.socket)
                if tenant:
                    c.hello(tenant)
                answers = {}
                for _ in range(n):
                    child = os.fork()
                    if child == 0:
                        os._exit(0)
                    try:
                        c.request(kp.FORKED, kp.body("forked", child_pid=child))
                        key = "ok"
                    except kp.KairosError as e:
                        key = str(e.code)
                        answers.setdefault("why", e.message)
                    answers[key] = answers.get(key, 0) + 1
                os.write(out_w, json.dumps(answers).encode())
                os.close(out_w)
                os.read(end_r, 1)
            finally:
                os._exit(0)
        os.close(out_w)
        os.close(end_r)

        self.addCleanup(reap, pid, end_w)
        chunks = []
        while chunk := os.read(out_r, 65536):
            chunks.append(chunk)
        os.close(out_r)
        return json.loads(b"".join(chunks))

    def fakeapp(self, tenant, *args):
        return subprocess.Popen([KAIROS, "run", "--tenant", tenant, "--", FAKEAPP, *args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env(FAKEDRV_JOURNAL=self.journal, **self.d.shim_env()))

    def assert_fork_handover_keeps_the_child_charged(self):
        """A member of team allocates 40 MiB, forks a child that keeps its files 3 s,
        and exits: the charge stays for the child (and only for it), the tenant's
        second process gets only what the quota leaves, and the charge goes when
        the child exits."""
        a = self.fakeapp("team", "-n", "20", "-s", str(PAGE), "-c", str(PAGE), "-f", "3",
                         "-k")
        fork = counts(a.stdout.readline(), "fakeapp: forked")
        self.assertGreater(fork["child"], 0)
        a.communicate(timeout=30)  # the parent exits without freeing; the child holds
        self.assertTrue(wait_for(lambda: "still holds its memory" in self.d.read_log()),
                        self.d.read_log())
        self.assertEqual(driver_holds(self.journal), fork["vidmem_bytes"])
        self.assertEqual(self.held("team"), fork["vidmem_bytes"])
        b = self.fakeapp("team", "-n", "40", "-s", str(PAGE), "-c", str(PAGE), "-w", "0.3")
        second = counts(b.stdout.readline(), "fakeapp: holding")
        self.assertGreater(second["failed"], 0)  # it met the quota
        self.assertLessEqual(driver_holds(self.journal), 64 * MiB)
        b.communicate(timeout=30)
        self.assertTrue(wait_for(lambda: driver_holds(self.journal) == 0, timeout=10.0))
        self.assertTrue(wait_for(lambda: self.held("team") == 0, timeout=3.0), self.d.ps())

    def test_a_process_in_no_tenant_reports_nothing(self):
        """4100 FORKED for real children of the sender, nobody in no tenant: each
        refused as from no member (before: each taken, the node's 4096 edges filled,
        and the tenant's fork report below refused: its child held 40 MiB that
        nothing charged)."""
        answers = self.flood(4100, as_nobody=True)
        self.assertEqual(answers.get(str(kp.ERR_NOT_REGISTERED)), 4100, answers)
        self.assertIn("not a member of any tenant", answers["why"])
        self.assert_fork_handover_keeps_the_child_charged()

    def test_a_tenant_that_fills_its_share_is_refused_alone(self):
        """A member of flood reports TENANT_SHARE + 1 children: the last is refused
        (BUSY, saying what to do; before: taken), team's hand-over is still taken,
        and flood's own fork with GPU files open fails closed."""
        answers = self.flood(TENANT_SHARE + 1, tenant="flood")
        self.assertEqual(answers.get("ok"), TENANT_SHARE, answers)
        self.assertEqual(answers.get(str(kp.ERR_BUSY)), 1, answers)
        self.assertIn("the most kairosd follows for one tenant", answers["why"])
        self.assert_fork_handover_keeps_the_child_charged()
        # flood's own process forks with its files open: kairosd cannot follow the
        # child, so fork() fails and the child is gone before it returns
        a = self.fakeapp("flood", "-n", "10", "-s", str(PAGE), "-c", str(PAGE), "-f", "3",
                         "-k")
        fork = counts(a.stdout.readline(), "fakeapp: forked")
        _, err = a.communicate(timeout=30)
        self.assertEqual(fork["child"], -1, err)
        self.assertIn("fork() failed (EAGAIN)", err)
        self.assertTrue(wait_for(lambda: driver_holds(self.journal) == 0, timeout=5.0))
        self.assertTrue(wait_for(lambda: self.held("flood") == 0, timeout=3.0), self.d.ps())

    def test_inherited_naming_a_pipe_is_refused(self):
        """A victim in team holds 32 MiB and shares a pipe with the attacker, which
        holds a driver file of its own. INHERITED naming the pipe, from no member
        and then from a member of other: refused (before: taken from the
        non-member, and the victim's 32 MiB stayed charged after it exited)."""
        shared_r, shared_w = os.pipe()
        go_r, go_w = os.pipe()  # the victim's "go"
        end_r, end_w = os.pipe()  # the attacker's
        victim = os.fork()
        if victim == 0:
            try:
                c = kp.Client(self.d.socket)
                c.hello("team")
                c.charge(0, 32 * MiB, 1)
                c.commit(0, 1, True, 32 * MiB, 32 * MiB)
                os.write(shared_w, b"in")
                os.read(go_r, 1)  # until told to go (shared_r open all along)
            finally:
                os._exit(0)
        self.addCleanup(reap, victim, go_w)
        self.assertEqual(os.read(shared_r, 2), b"in")
        self.assertTrue(wait_for(lambda: self.held("team") == 32 * MiB))
        out_r, out_w = os.pipe()
        attacker = os.fork()
        if attacker == 0:
            try:
                drop_to_nobody()
                kept = driver_file("attacker")  # noqa: F841 (a driver file it holds)
                c = kp.Client(self.d.socket)
                answers = []
                for tenant in (None, "other"):
                    if tenant:
                        c.hello(tenant)
                    try:
                        c.request(kp.INHERITED, inherited_body(victim, [shared_r]))
                        answers.append("ok")
                    except kp.KairosError as e:
                        answers.append(f"{e.code} {e.message}")
                os.write(out_w, json.dumps(answers).encode())
                os.close(out_w)
                os.read(end_r, 1)
            finally:
                os._exit(0)
        os.close(out_w)
        self.addCleanup(reap, attacker, end_w)
        answers = json.loads(os.read(out_r, 65536))
        self.assertTrue(answers[0].startswith(f"{kp.ERR_NOT_REGISTERED} "), answers)
        self.assertIn("not a member of any tenant", answers[0])
        self.assertTrue(answers[1].startswith(f"{kp.ERR_PERMISSION} "), answers)
        self.assertIn(f"descriptor {shared_r} is not an NVIDIA device file", answers[1])
        for fd in (shared_w, go_r, end_r):
            os.close(fd)
        reap(victim, go_w)  # the victim goes; the attacker holds the pipe and its file
        self.assertTrue(wait_for(lambda: self.held("team") == 0, timeout=3.0), self.d.ps())
        os.close(shared_r)
        os.close(out_r)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
