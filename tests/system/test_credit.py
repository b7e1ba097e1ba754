#!/usr/bin/env python3
"""Credit granted ahead (docs/memory.md, protocol 3), played by attackers against
the real kairosd, libkairos.so and the fake NVIDIA driver: processes and threads of
one tenant racing, a process sitting on credit next to a neighbour that needs it,
a process killed holding credit, kairosd killed -9 and restarted under allocation
load and while a new process starts, a member that never answers a recall, a
process alone near the quota allocating with kairosd stopped, two processes near
the quota taking turns. Each
asserts that what the driver gave never exceeds the quota, that no allocation
below the quota is refused, and that the ledger ends equal to what the driver holds.
Usage: test_credit.py KAIROSD KAIROS SHIM FAKEDRV FAKEAPP"""
import functools
import json
import os
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kairos_proto as kp  # noqa: E402
from harness import driver_peak, line_counts, pass_time, preload_env, wait_for  # noqa: E402

KAIROSD, KAIROS, SHIM, FAKEDRV, FAKEAPP = sys.argv[1:6]
env = functools.partial(preload_env, SHIM, FAKEDRV)
MiB = 1 << 20
PAGE = 2 * MiB
QUOTA = 64 * MiB
CREDIT, CREDIT_RECALL = 21, 22
REVOKED = kp.CREDIT_REVOKED



class Credit(unittest.TestCase):
    def setUp(self):
        self.d = kp.Daemon(KAIROSD, tenants_yaml="  - name: team\n    memory: { 0: 64M }\n"
                           "  - name: big\n    memory: { 0: 16G }\n", gpus=1).start()
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait(10)
            for f in (p.stdin, p.stdout, p.stderr):
                f.close()
        self.d.stop()

    def run_tenant(self, *args, tenant="team", **extra):
        """fakeapp in tenant; its stdin a pipe, which ends a -W hold when closed."""
        p = subprocess.Popen([KAIROS, "run", "--tenant", tenant, "--", FAKEAPP, *args],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             env=env(**extra, **self.d.shim_env()))
        self.procs.append(p)
        return p

    def holding(self, p):
        line = p.stdout.readline()
        if not line.startswith("fakeapp: holding"):
            self.fail(repr(line) + p.stderr.read())
        return line_counts(line)

    def row(self, tenant):
        """The tenant's row of kairos ps --json, None when it is not listed."""
        r = subprocess.run([KAIROS, "ps", "--json"], capture_output=True, text=True,
                           env=env(KAIROS_SOCKET=self.d.socket), timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        teams = [t for t in json.loads(r.stdout)["tenants"] if t["name"] == tenant]
        return teams[0] if teams else None

    def held(self, tenant="team"):
        row = self.row(tenant)
        return row["gpus"][0]["held"] if row else 0

    def processes(self, tenant="team"):
        row = self.row(tenant)
        return row["processes"] if row else 0

    def rounds(self, p):
        line = p.stdout.readline()
        if not line.startswith("fakeapp: rounds"):
            self.fail(repr(line) + p.stderr.read())
        return line_counts(line)

    def last_line(self, p):
        """The final counts line (read line by line: after readline(), communicate()
        would miss what the buffer already holds); ends a -W hold first."""
        p.stdin.close()
        line = p.stdout.readline()
        self.assertEqual(p.wait(60), 0, p.stderr.read())
        return line_counts(line)

    def finish(self, p):
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0, err)
        return line_counts(out.splitlines()[-1])

    def kill9_and_restart(self, down_s=0.0):
        self.d.proc.kill()
        self.d.proc.wait(10)
        self.d.logf.close()
        self.d.proc = None
        pass_time(down_s, "kairosd stays down")
        self.d.start()

    def test_racing_processes_and_threads_never_exceed_the_quota(self):
        """6 processes x 4 threads race 2 MiB allocations for 6 times the quota:
        together they hold exactly the quota (nothing refused while credit sat
        unused), never more, and the ledger ends equal to what they hold."""
        ps = [self.run_tenant("-t", "4", "-n", "16", "-s", str(PAGE), "-c", str(PAGE),
                              "-W") for _ in range(6)]
        got = []
        for p in ps:  # one that starts when the tenant is full is refused its context
            line = p.stdout.readline()
            if line.startswith("fakeapp: holding"):
                got.append(line_counts(line))
            else:
                p.wait(30)
                self.assertIn("context memory failed: status 0x51", p.stderr.read())
                self.assertEqual(p.returncode, 1)
        total = sum(g["vidmem_bytes"] for g in got)
        self.assertLessEqual(total, QUOTA)
        self.assertEqual(total, QUOTA, got)
        self.assertGreater(sum(g["failed"] for g in got), 0)
        self.assertTrue(wait_for(lambda: self.held() == total), (self.held(), total))
        for p in ps:
            if p.returncode is None:
                self.finish(p)
        self.assertTrue(wait_for(lambda: self.held() == 0), self.held())

    def test_credit_held_by_a_neighbour_is_recalled_before_a_refusal(self):
        """A takes a little and sits on its credit; B then wants more than the room
        left beside A's holdings: B gets all of it, to the byte."""
        a = self.run_tenant("-n", "1", "-s", str(PAGE), "-c", str(PAGE), "-W")
        ca = self.holding(a)
        b = self.run_tenant("-n", "40", "-s", str(PAGE), "-c", str(PAGE), "-W")
        cb = self.holding(b)
        self.assertEqual(cb["vidmem_bytes"], QUOTA - ca["vidmem_bytes"])
        self.assertTrue(wait_for(lambda: self.held() == QUOTA), self.held())
        self.finish(b)
        self.finish(a)

    def test_a_process_killed_holding_credit_gives_it_back(self):
        a = self.run_tenant("-n", "3", "-s", str(PAGE), "-c", str(PAGE), "-w", "60")
        self.holding(a)
        a.send_signal(signal.SIGKILL)
        a.wait(10)
        self.assertTrue(wait_for(lambda: self.held() == 0), self.held())
        b = self.run_tenant("-n", "40", "-s", str(PAGE), "-c", str(PAGE))
        cb = self.finish(b)
        self.assertEqual(cb["vidmem_bytes"], QUOTA)  # A's credit came back whole

    def test_kill9_restart_under_load_refuses_nothing_below_the_quota(self):
        """Three processes allocate (one 2 MiB block per 100 ms each, 42 of 64 MiB
        in all) while kairosd is killed -9 and is down for a second: not one
        allocation is refused, and the new ledger holds what the driver gave."""
        ps = [self.run_tenant("-n", "6", "-s", str(PAGE), "-c", str(PAGE), "-W",
                              FAKEDRV_ALLOC_DELAY_MS="100") for _ in range(3)]
        # all three registered and allocating before the kill: a shim still saying its
        # first HELLO when kairosd dies is refused at start, which is not under test
        self.assertTrue(wait_for(lambda: self.processes() == 3 and self.held() > 0,
                                 timeout=10.0), self.d.ps())
        self.kill9_and_restart(down_s=1.0)
        got = [self.holding(p) for p in ps]
        self.assertEqual([g["failed"] for g in got], [0, 0, 0])
        total = sum(g["vidmem_bytes"] for g in got)
        self.assertEqual(total, 3 * 7 * PAGE)
        self.assertTrue(wait_for(lambda: self.held() == total), (self.held(), total))
        for p in ps:
            self.finish(p)
        self.assertTrue(wait_for(lambda: self.held() == 0), self.held())

    def test_no_grant_to_a_new_process_before_the_members_reattach(self):
        """A holds 48 MiB; kairosd is killed -9 and restarted, and B starts at once,
        before A has reattached, wanting 80 MiB: B gets only the 16 MiB A does not
        hold (once A is back), never a byte of A's."""
        a = self.run_tenant("-n", "23", "-s", str(PAGE), "-c", str(PAGE), "-W")
        ca = self.holding(a)
        self.assertEqual(ca["vidmem_bytes"], 48 * MiB)
        self.kill9_and_restart()
        b = self.run_tenant("-n", "40", "-s", str(PAGE), "-c", str(PAGE), "-W")
        cb = self.holding(b)
        self.assertLessEqual(ca["vidmem_bytes"] + cb["vidmem_bytes"], QUOTA)
        self.assertEqual(cb["vidmem_bytes"], QUOTA - ca["vidmem_bytes"])
        self.assertTrue(wait_for(lambda: self.held() == QUOTA), self.held())
        self.finish(b)
        self.finish(a)
        self.assertIn("no memory is granted until they reattach", self.d.read_log())

    def test_a_stopped_daemon_delays_no_allocation_within_credit(self):
        """kairosd is stopped (SIGSTOP: a slow or hung daemon) while a process makes
        20 allocations of 2 MiB, 100 ms each in the driver, within the credit its
        first one brought (a 256 MiB chunk in a 16 GiB tenant): none waits for
        kairosd, none is refused; once kairosd runs again its ledger holds them."""
        a = self.run_tenant("-n", "20", "-s", str(PAGE), "-c", str(PAGE), "-W",
                            tenant="big", FAKEDRV_ALLOC_DELAY_MS="100")
        self.assertTrue(wait_for(lambda: self.held("big") > 0, step=0.002), self.held("big"))
        self.d.proc.send_signal(signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            ca = self.holding(a)
            took = time.monotonic() - t0
        finally:
            self.d.proc.send_signal(signal.SIGCONT)
        self.assertEqual(ca["failed"], 0)
        self.assertEqual(ca["vidmem_bytes"], 21 * PAGE)
        self.assertLess(took, 2.0 + 1.0)  # 20 x 100 ms in the driver, no wait for kairosd
        self.assertTrue(wait_for(lambda: self.held("big") == 21 * PAGE), self.held("big"))
        self.finish(a)

    def test_a_member_that_never_answers_a_recall_cannot_take_its_neighbours_room(self):
        """A hostile member takes 48 MiB of credit and reads nothing: its recall times
        out and its credit is revoked, but stays counted (a member may allocate from
        its credit until it reads the revocation), so the neighbour gets the 16 MiB
        beside it and is refused the rest within seconds, never a byte of those 48.
        The member then reads the revocation and says it took 20 MiB of them
        meanwhile: the other 28 go to a third process, to the byte. Never more than
        the quota, in the ledger or the driver."""
        c = self.d.client()
        c.hello("team")
        body = kp.body("credit", report=1, need=48 * MiB, least=48 * MiB)
        t, reply = c.request(CREDIT, body)
        self.assertEqual(t, CREDIT)
        self.assertEqual(kp.fields("credit", reply)["need"], 48 * MiB)  # granted
        t0 = time.monotonic()
        b = self.run_tenant("-n", "40", "-s", str(PAGE), "-c", str(PAGE), "-w", "60")
        cb = self.holding(b)
        self.assertLess(time.monotonic() - t0, 20)
        self.assertEqual(cb["vidmem_bytes"], QUOTA - 48 * MiB)
        self.assertGreater(cb["failed"], 0)
        self.assertTrue(wait_for(lambda: self.held() == QUOTA - 48 * MiB), self.held())
        log = self.d.read_log()
        self.assertIn("did not answer a credit recall", log)
        self.assertIn("stays counted until it says it read this or exits", log)
        self.assertIn("48.0 MiB more reserved as its processes' unused credit", log)
        # the hostile member reads at last: the recall, then the revocation
        types = []
        while REVOKED not in types:
            t, seq, msg = c.recv()
            types.append(t == CREDIT and kp.fields("credit", msg)["flags"] & REVOKED)
        # a report built before it read that changes nothing; its word does
        t, _ = c.request(CREDIT, kp.body("credit", report=2, held=10 * MiB))
        t, _ = c.request(CREDIT, kp.body("credit", flags=REVOKED, report=3, held=20 * MiB))
        self.assertTrue(wait_for(lambda: self.held() == QUOTA - 28 * MiB), self.held())
        d = self.run_tenant("-n", "40", "-s", str(PAGE), "-c", str(PAGE), "-w", "60")
        cd = self.holding(d)
        self.assertEqual(cd["vidmem_bytes"], 28 * MiB)
        self.assertLessEqual(cb["vidmem_bytes"] + cd["vidmem_bytes"] + 20 * MiB, QUOTA)
        self.assertTrue(wait_for(lambda: self.held() == QUOTA), self.held())
        c.close()
        self.assertTrue(wait_for(lambda: self.held() == QUOTA - 20 * MiB), self.held())

    def test_a_revoked_shim_says_so_and_its_credit_comes_back(self):
        """A holds 4 MiB and some credit and is stopped (SIGSTOP) when B needs that
        credit: the recall goes unanswered and A is revoked, its credit still
        counted; A then runs again (within the second B waits for its word), its
        shim answers the recall late, giving the credit back, and reads the
        revocation: B gets all but what A holds, the ledger equals the driver."""
        a = self.run_tenant("-n", "1", "-s", str(PAGE), "-c", str(PAGE), "-W")
        ca = self.holding(a)
        self.assertTrue(wait_for(lambda: self.held() == ca["vidmem_bytes"]), self.held())
        a.send_signal(signal.SIGSTOP)
        try:
            b = self.run_tenant("-n", "40", "-s", str(PAGE), "-c", str(PAGE), "-W")
            self.assertTrue(wait_for(lambda: "did not answer a credit recall" in
                                     self.d.read_log(), timeout=20, step=0.005))
        finally:
            a.send_signal(signal.SIGCONT)
        cb = self.holding(b)
        self.assertEqual(cb["vidmem_bytes"], QUOTA - ca["vidmem_bytes"])
        self.assertTrue(wait_for(lambda: self.held() == QUOTA), self.held())
        self.finish(b)
        self.finish(a)
        self.assertTrue(wait_for(lambda: self.held() == 0), self.held())

    def test_alone_near_the_quota_allocations_need_no_message(self):
        """A process holds 62 of its tenant's 64 MiB (less than a chunk, 4 MiB, is
        left) and allocates and frees the last 2 MiB ten times with kairosd stopped
        (SIGSTOP): alone near the quota it was granted all the room left and keeps
        it, so not one allocation asks kairosd (one that did would wait 5 s and be
        refused, fail-closed). Played with fast allocations and with slow ones (20 ms
        each in the driver, as on a loaded machine): then its reports are answered
        between two allocations, and one answered ALL while 2 MiB of room was still
        ungranted left the last allocation without credit (a loaded CI run)."""
        for delay_ms in (0, 20):
            with self.subTest(alloc_delay_ms=delay_ms):
                a = self.run_tenant("-n", "30", "-s", str(PAGE), "-c", str(PAGE), "-W",
                                    "-R", "10", FAKEDRV_ALLOC_DELAY_MS=str(delay_ms))
                ca = self.holding(a)
                self.assertEqual(ca["vidmem_bytes"], 62 * MiB)
                self.assertTrue(wait_for(lambda: self.held() == 62 * MiB, timeout=30,
                                         step=0.002), self.held())
                self.d.proc.send_signal(signal.SIGSTOP)
                try:
                    a.stdin.close()  # the rounds begin once kairosd is stopped
                    r = self.rounds(a)
                finally:
                    self.d.proc.send_signal(signal.SIGCONT)
                self.assertEqual((r["failed"], r["n"]), (0, 10))
                self.last_line(a)
                self.assertTrue(wait_for(lambda: self.held() == 0, timeout=30), self.held())

    def test_two_members_near_the_quota_both_get_their_allocations(self):
        """A holds 58 MiB and is granted the 6 left; B starts and its context (2 MiB)
        recalls A's credit; then both allocate and free 2 MiB 200 times at once, 4
        MiB left for the two: not one allocation is refused (there is room for both
        at every moment, recall finds it), the driver never holds more than the
        quota, and the ledger ends equal to the driver."""
        journal = os.path.join(self.d.dir, "journal")
        a = self.run_tenant("-n", "28", "-s", str(PAGE), "-c", str(PAGE), "-w", "1",
                            "-R", "200", FAKEDRV_JOURNAL=journal)
        ca = self.holding(a)
        self.assertEqual(ca["vidmem_bytes"], 58 * MiB)
        b = self.run_tenant("-n", "0", "-s", str(PAGE), "-c", str(PAGE), "-w", "0.5",
                            "-R", "200", FAKEDRV_JOURNAL=journal)
        cb = self.holding(b)
        self.assertEqual((cb["failed"], cb["vidmem_bytes"]), (0, 2 * MiB))
        ra, rb = self.rounds(a), self.rounds(b)
        self.assertEqual((ra["failed"], ra["n"]), (0, 200))
        self.assertEqual((rb["failed"], rb["n"]), (0, 200))
        la, lb = self.last_line(a), self.last_line(b)
        self.assertEqual(la["vidmem_bytes"] + lb["vidmem_bytes"], 60 * MiB)
        self.assertLessEqual(driver_peak(journal), QUOTA)
        self.assertGreaterEqual(driver_peak(journal), 62 * MiB)  # they did allocate
        self.assertTrue(wait_for(lambda: self.held() == 0), self.held())


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
