#!/usr/bin/env python3
"""Legacy CUDA IPC (cudaIpcGetMemHandle / cudaIpcOpenMemHandle) between tenants, with
no GPU: kairosd, `kairos run`, the real libkairos.so and the fake NVIDIA driver, which
models the share of an object (NV0000 CLIENT_SHARE_OBJECT, RM_SHARE) and the
importer's RM_DUP_OBJECT across processes (the memory lives while any handle to it
does). ipcapp plays both sides. The decision (docs/memory.md): the exporter stays
charged while an import lives; the importer's tenant is charged nothing; the
exporter's own free of a shared object that no verified import holds releases at
once.
Usage: test_ipc.py KAIROSD KAIROS SHIM FAKEDRV IPCAPP"""
import functools
import json
import os
import re
import signal
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kairos_proto as kp  # noqa: E402
from kairos_proto import Client, Daemon, KairosError  # noqa: E402
from harness import driver_holds, hold_still, preload_env, wait_for  # noqa: E402

KAIROSD, KAIROS, SHIM, FAKEDRV, IPCAPP = sys.argv[1:6]
ASAN_FIRST = os.environ.get("KAIROS_PRELOAD_FIRST", "")
env = functools.partial(preload_env, SHIM, FAKEDRV)
MiB = 1 << 20
GPU = "gpu 0 GPU-fake-0000 85899345920\n"  # a scripted GPU that lists no process
# A departed process's charge includes the credit it had taken but not reported yet
# (at most two 4 MiB chunks under a 64 MiB quota: docs/memory.md, linger).
CREDIT_SLACK = 8 * MiB
RM_INSUFFICIENT_PERMISSIONS = 0x1B


def fields(line):
    return dict(re.findall(r"(\w+)=(\S+)", line))


class App:
    """One ipcapp under `kairos run --tenant`, driven by commands on its stdin."""

    def __init__(self, case, tenant, *args):
        """tenant None: a raw process, on the fake driver without the shim."""
        self.case = case
        if tenant is None:
            e = env(FAKEDRV_JOURNAL=case.journal)
            e["LD_PRELOAD"] = " ".join(p for p in (ASAN_FIRST, FAKEDRV) if p)
            cmd = [IPCAPP, *args]
        else:
            e = env(FAKEDRV_JOURNAL=case.journal, **case.d.shim_env())
            cmd = [KAIROS, "run", "--tenant", tenant, "--", IPCAPP, *args]
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=e)
        case.addCleanup(self.stop)

    def line(self, prefix):
        line = self.p.stdout.readline()
        if not line:  # its output ended: it is exiting; say how, with what it wrote
            self.p.wait(timeout=30)
        self.case.assertTrue(line.startswith(prefix),
                             (line, self.p.returncode if self.p.poll() is not None else "running",
                              self.p.stderr.read() if self.p.poll() is not None else ""))
        return fields(line)

    def command(self, what, prefix=None):
        self.p.stdin.write(what + "\n")
        self.p.stdin.flush()
        return self.line(prefix) if prefix else None

    def exit(self):
        self.p.stdin.close()  # the end of input: exits without freeing anything
        self.p.wait(timeout=30)

    def stop(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(timeout=30)
        for f in (self.p.stdin, self.p.stdout, self.p.stderr):
            if f and not f.closed:
                f.close()


class LegacyIpc(unittest.TestCase):
    def setUp(self):
        tenants = ("  - name: team\n    memory: { 0: 64M }\n"
                   "  - name: other\n    memory: { 0: 8M }\n"
                   "  - name: mallory\n    memory: { 0: 8M }\n")
        self.d = Daemon(KAIROSD, tenants_yaml=tenants, gpus=1, fake=GPU).start()
        self.journal = os.path.join(self.d.dir, "fakedrv.journal")

    def tearDown(self):
        self.d.stop()

    def ps(self):
        r = subprocess.run([KAIROS, "ps", "--json"], capture_output=True, text=True,
                           env=env(KAIROS_SOCKET=self.d.socket), timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        return {t["name"]: t for t in json.loads(r.stdout)["tenants"]}

    def held(self, tenant="team"):
        return sum(g["held"] for g in self.ps()[tenant]["gpus"])

    def assert_held(self, want, tenant="team"):
        wait_for(lambda: self.held(tenant) == want, timeout=3.0)
        self.assertEqual(self.held(tenant), want, self.ps())

    def export(self, *args, n=10, size=4 * MiB):
        a = App(self, "team", "export", "-n", str(n), "-s", str(size), *args)
        e = a.line("ipcapp: exported")
        self.assertEqual(int(e["bytes"]), n * size)
        self.assert_held(n * size)
        return a, e

    def importer(self, e, tenant="other"):
        b = App(self, tenant, "import", "-C", e["client"], "-O", e["objects"])
        return b, b.line("ipcapp: imported")

    def assert_departed_charge(self, want):
        """The exporter freed what the importer holds, then departed: its tenant stays
        charged, never less than the driver holds for it, and once the departed
        process's own leftover credit is released (it lingers while the process's
        files close), exactly that (kairosd keeps the freed objects' bytes)."""
        wait_for(lambda: self.held() >= want, timeout=3.0)
        self.assertGreaterEqual(self.held(), want, self.ps())
        self.assertTrue(wait_for(lambda: self.held() == want, timeout=3.0), self.ps())

    def assert_the_quota_holds(self):
        """A new process of the exporter's tenant gets only what is left: the driver
        never holds more than the quota for the tenant."""
        c = App(self, "team", "export", "-n", "40", "-s", str(2 * MiB))
        line = c.p.stdout.readline()
        self.assertFalse(line.startswith("ipcapp: exported"), line)  # it met the quota
        self.assertLessEqual(driver_holds(self.journal), 64 * MiB)
        c.stop()

    def test_the_exporter_frees_and_exits_while_another_tenant_keeps_the_mapping(self):
        """The exporter's tenant stays charged while the import lives (never less than
        the driver holds), the importer's tenant is charged nothing, the quota holds,
        and the ledger equals the driver once the importer exits."""
        a, e = self.export()
        b, i = self.importer(e)
        self.assertEqual((int(i["n"]), int(i["failed"])), (10, 0))
        self.assertEqual(a.command("free", "ipcapp: freed")["n"], "10")
        self.assertEqual(driver_holds(self.journal), 40 * MiB)  # freed, but imported
        self.assert_held(40 * MiB)
        a.exit()
        hold_still(0.5, "more than a linger check (the charge stays)")
        self.assertEqual(driver_holds(self.journal), 40 * MiB)
        self.assert_departed_charge(40 * MiB)
        self.assertEqual(self.held("other"), 0)
        self.assertIn("(CUDA IPC)", self.d.read_log())
        self.assert_the_quota_holds()
        self.assertEqual(b.command("free", "ipcapp: freed")["n"], "10")
        b.exit()
        self.assertTrue(wait_for(lambda: driver_holds(self.journal) == 0, timeout=5.0))
        self.assertTrue(wait_for(lambda: self.held() == 0, timeout=3.0), self.ps())

    def test_the_importer_exits_without_freeing(self):
        """The importer exits (killed, nothing freed): its file's last close frees the
        dups, and the departed exporter's charge goes with them."""
        a, e = self.export("-R")  # RM_SHARE rather than the control
        b, i = self.importer(e)
        self.assertEqual(int(i["n"]), 10)
        a.command("free", "ipcapp: freed")
        a.exit()
        hold_still(0.5, "more than a linger check (the charge stays)")
        self.assertEqual(driver_holds(self.journal), 40 * MiB)
        self.assert_departed_charge(40 * MiB)
        b.p.kill()
        b.p.wait(timeout=30)
        self.assertTrue(wait_for(lambda: driver_holds(self.journal) == 0, timeout=5.0))
        self.assertTrue(wait_for(lambda: self.held() == 0, timeout=3.0), self.ps())
        self.assertEqual(self.held("other"), 0)

    def test_an_import_that_ends_while_the_exporter_lives(self):
        """The importer frees its dups, then the exporter frees: no import lives, so the
        free releases at once while the exporter keeps running."""
        a, e = self.export()
        b, _ = self.importer(e)
        b.command("free", "ipcapp: freed")
        a.command("free", "ipcapp: freed")
        self.assertEqual(driver_holds(self.journal), 0)
        self.assert_held(0)
        b.exit()
        a.exit()

    def test_a_shared_object_freed_with_no_import_is_released_at_once(self):
        """PyTorch's caching allocator shares whole segments and, short of memory,
        frees them and allocates again: the exporter's free of shared memory that no
        import holds leaves nothing charged (the ledger equals the driver), the quota
        fits again in the same process, and a producer that shares and frees in a
        loop never runs into its quota."""
        a, e = self.export(n=16)  # the whole 64 MiB quota, shared
        self.assertEqual(a.command("free", "ipcapp: freed")["n"], "16")
        self.assertEqual(driver_holds(self.journal), 0)
        self.assert_held(0)
        again = a.command("again", "ipcapp: exported")  # the quota again, same handles
        self.assertEqual(int(again["bytes"]), 64 * MiB)
        self.assert_held(64 * MiB)
        self.assertEqual(driver_holds(self.journal), 64 * MiB)
        a.command("free", "ipcapp: freed")
        churned = a.command("churn 200", "ipcapp: churned")  # 800 MiB shared and freed
        self.assertEqual((churned["n"], churned["status"]), ("200", "0"))
        self.assertEqual(driver_holds(self.journal), 0)
        self.assert_held(0)
        a.exit()

    def test_the_exporters_free_stays_charged_while_an_import_lives(self):
        """The exporter frees memory another tenant imported and keeps running: its
        tenant stays charged while the import lives (the driver never holds more than
        the quota for it, whatever the exporter allocates, shares and frees again
        under the same handles), nothing is charged to the importer, and the charge
        goes when the importer ends."""
        a, e = self.export()
        b, i = self.importer(e)
        self.assertEqual(int(i["n"]), 10)
        a.command("free", "ipcapp: freed")
        self.assertEqual(driver_holds(self.journal), 40 * MiB)
        self.assert_held(40 * MiB)
        self.assertEqual(self.held("other"), 0)
        self.assertIn("stay charged until the last import ends", self.d.read_log())
        refused = a.command("again", "ipcapp: refused")  # 24 MiB of room left: 6 blocks
        self.assertEqual(refused["n"], "6")
        self.assertLessEqual(driver_holds(self.journal), 64 * MiB)
        self.assert_held(64 * MiB)
        # the 6 new objects under the imported handles were imported by nobody
        self.assertEqual(a.command("free", "ipcapp: freed")["n"], "6")
        self.assert_held(40 * MiB)
        churned = a.command("churn 20", "ipcapp: churned")
        self.assertEqual(churned["status"], "0")
        self.assertLessEqual(driver_holds(self.journal), 64 * MiB)
        self.assert_held(40 * MiB)
        b.command("free", "ipcapp: freed")
        self.assertEqual(driver_holds(self.journal), 0)
        self.assert_held(0)
        self.assertEqual(a.command("again", "ipcapp: exported")["bytes"], str(40 * MiB))
        b.exit()
        a.exit()

    def test_the_importer_hangs_up_after_the_exporters_free(self):
        """The importer is killed (nothing freed, nothing said) after the exporter,
        still running, freed: the charge goes with the importer's hang-up."""
        a, e = self.export("-R")
        b, i = self.importer(e)
        self.assertEqual(int(i["n"]), 10)
        a.command("free", "ipcapp: freed")
        self.assert_held(40 * MiB)
        b.p.kill()
        b.p.wait(timeout=30)
        self.assertTrue(wait_for(lambda: driver_holds(self.journal) == 0, timeout=5.0))
        self.assert_held(0)
        a.exit()

    def test_an_import_begun_after_the_free_is_refused_and_keeps_nothing(self):
        """The importer dups right after the exporter's free: the driver refuses the
        dup of a freed object, kairosd refuses the claim, and nothing stays charged."""
        a, e = self.export()
        a.command("free", "ipcapp: freed")
        self.assert_held(0)
        b, i = self.importer(e)
        self.assertEqual((int(i["n"]), int(i["failed"])), (0, 10))
        self.assertIn("reported object", self.d.read_log())
        self.assert_held(0)
        self.assertEqual(driver_holds(self.journal), 0)
        b.exit()
        a.exit()

    def test_a_kairosd_restart_forgets_nothing(self):
        """kairosd restarts while the import lives: both shims tell the new kairosd
        again what they share and import. The importer goes first here (the exporter
        is stopped meanwhile): its import waits for the exporter's share. The
        exporter that then frees and exits stays charged while the importer holds."""
        a, e = self.export()
        b, i = self.importer(e)
        self.assertEqual(int(i["n"]), 10)
        # the GPU backend vouches for the exporter's reattach claim (reattach.h)
        self.d.write_fake(GPU + f"proc 0 {e['pid']} {40 * MiB}\n")
        os.kill(int(e["pid"]), signal.SIGSTOP)
        self.addCleanup(lambda: a.p.poll() is None and os.kill(int(e["pid"]), signal.SIGCONT))
        self.d.stop()
        self.d.start()
        self.assertTrue(wait_for(lambda: "reported again after a restart" in self.d.read_log(),
                                 timeout=10.0), self.d.read_log()[-3000:])
        os.kill(int(e["pid"]), signal.SIGCONT)
        self.assertTrue(wait_for(lambda: self.ps()["team"]["processes"] == 1, timeout=10.0),
                        self.ps())
        self.d.write_fake(GPU)
        self.assertTrue(wait_for(lambda: self.d.read_log().count("(scope 1)") >= 20,
                                 timeout=5.0))  # its 10 shares, told twice
        a.command("free", "ipcapp: freed")
        a.exit()
        hold_still(0.5, "more than a linger check (the charge stays)")
        self.assertEqual(driver_holds(self.journal), 40 * MiB)
        self.assert_departed_charge(40 * MiB)
        self.assertEqual(self.held("other"), 0)
        b.exit()
        self.assertTrue(wait_for(lambda: driver_holds(self.journal) == 0, timeout=5.0))
        self.assertTrue(wait_for(lambda: self.held() == 0, timeout=3.0), self.ps())

    def test_an_importer_without_the_shim_is_not_followed(self):
        """A raw importer (no shim: nothing reported) dups the memory. While the
        exporter holds it, it stays charged; the exporter's free releases it, since
        kairosd knows of no import (what the raw process keeps is the process's own,
        as memory it allocated without the shim would be: the audit reports it,
        docs/security.md)."""
        a, e = self.export()
        b, i = self.importer(e, tenant=None)
        self.assertEqual(int(i["n"]), 10)
        self.assert_held(40 * MiB)
        a.command("free", "ipcapp: freed")
        self.assertEqual(driver_holds(self.journal), 40 * MiB)
        self.assert_held(0)
        b.exit()
        self.assertTrue(wait_for(lambda: driver_holds(self.journal) == 0, timeout=5.0))
        a.exit()

    def test_a_dup_the_driver_refuses_keeps_nothing(self):
        """Shared with one pid only (RM's PID share type): another process's dup fails
        in the driver, kairosd refuses its claim, and the exporter's exit releases."""
        a, e = self.export("-t", "4", "-a", "1")
        b, i = self.importer(e)
        self.assertEqual((int(i["n"]), int(i["failed"])), (0, 10))
        self.assertEqual(int(i["status"]), RM_INSUFFICIENT_PERMISSIONS)
        self.assertIn("not shared with pid", self.d.read_log())
        a.exit()
        self.assertTrue(wait_for(lambda: self.held() == 0, timeout=3.0), self.ps())
        self.assertEqual(driver_holds(self.journal), 0)
        b.exit()


def imported_body(flags, client_src, object_src, client, obj=0):
    return kp.body("imported", flags=flags, h_client_src=client_src, h_object_src=object_src,
                   h_client=client, h_object=obj)


class LyingImporters(unittest.TestCase):
    """IMPORTED as a hostile client sends it: a claim that kairosd cannot check
    against a member's SHARED report changes nothing, and none moves a charge onto
    another tenant."""
    setUp, tearDown, ps, held, assert_held, export = (
        LegacyIpc.setUp, LegacyIpc.tearDown, LegacyIpc.ps, LegacyIpc.held,
        LegacyIpc.assert_held, LegacyIpc.export)
    assert_departed_charge = LegacyIpc.assert_departed_charge

    def liar(self, tenant="other"):
        c = Client(self.d.socket)
        self.addCleanup(c.close)
        if tenant:
            c.hello(tenant)
        return c

    def claim(self, c, client_src, object_src):
        c.request(kp.IMPORTED, imported_body(kp.IMPORT_BEGIN, client_src, object_src, 0x1234))

    def test_an_import_of_memory_never_shared_is_refused(self):
        a, e = self.export("-t", "4", "-a", "1")  # shared with pid 1 only
        c = self.liar()
        client, first = int(e["client"], 0), int(e["objects"].split(",")[0], 0)
        for obj in (first, first + 0x1000):  # not shared with us; never allocated
            with self.assertRaises(KairosError) as err:
                self.claim(c, client, obj)
            self.assertEqual(err.exception.code, kp.ERR_PERMISSION, str(err.exception))
        a.exit()  # nothing verified holds its memory: released at once
        self.assertTrue(wait_for(lambda: self.held() == 0, timeout=3.0), self.ps())
        self.assertEqual(self.held("other"), 0)

    def test_only_members_claim_and_never_their_own(self):
        a, e = self.export()
        client, first = int(e["client"], 0), int(e["objects"].split(",")[0], 0)
        with self.assertRaises(KairosError) as err:
            self.claim(self.liar(tenant=None), client, first)
        self.assertEqual(err.exception.code, kp.ERR_NOT_REGISTERED)
        with self.assertRaises(KairosError) as err:  # an END of an import never begun
            self.liar().request(kp.IMPORTED, imported_body(kp.IMPORT_END, client, first, 7))
        self.assertEqual(err.exception.code, kp.ERR_INVALID)
        a.exit()
        self.assertTrue(wait_for(lambda: self.held() == 0, timeout=3.0), self.ps())

    def test_a_claim_on_shared_memory_keeps_only_the_exporters_own_charge(self):
        """Shared with every process (so the liar could dup it for real): its claim
        keeps the departed exporter's own charge while the liar lives - no more than
        the exporter held, nothing on the liar's tenant - and nothing once it leaves."""
        a, e = self.export()
        c = self.liar()
        self.claim(c, int(e["client"], 0), int(e["objects"].split(",")[0], 0))
        a.exit()
        hold_still(0.5, "more than a linger check (the charge stays)")
        self.assertLessEqual(self.held(), 40 * MiB + CREDIT_SLACK)
        self.assertEqual(self.held("other"), 0)
        c.close()
        self.assertTrue(wait_for(lambda: self.held() == 0, timeout=3.0), self.ps())

    def test_a_lie_about_a_free_keeps_only_the_liars_own_tenant(self):
        """A member of another tenant, and the exporter's own tenant, say they freed
        the imported object, with absurd and huge sizes: no reply comes (the
        connection stays usable), nothing lands on the liar's tenant, and the
        exporter's tenant keeps only what the real exporter's free kept."""
        a, e = self.export()
        b, i = LegacyIpc.importer(self, e)
        self.assertEqual(int(i["n"]), 10)
        client, first = int(e["client"], 0), int(e["objects"].split(",")[0], 0)
        for tenant in ("other", "team"):
            c = self.liar(tenant)
            c.send(kp.SHARED, freed_body(client, first, 1 << 49))  # no reply comes
            self.assertIn(tenant, c.ps())  # the next reply is its own, not an OK
            with self.assertRaises(KairosError):  # refused: an ERROR, not a hang-up
                c.request(kp.SHARED, freed_body(client, first, (1 << 50) + 1))
        self.assertEqual(self.held("other"), 0)
        a.command("free", "ipcapp: freed")
        self.assert_held(40 * MiB)
        b.command("free", "ipcapp: freed")
        self.assert_held(0)
        self.assertEqual(self.held("other"), 0)
        b.exit()
        a.exit()


def freed_body(client, obj, nbytes, gpu=0):
    return kp.body("shared", h_client=client, h_object=obj, flags=kp.SHARED_FREED, gpu=gpu,
                   bytes=nbytes)


def shared_body(client, obj, nbytes=0, share_type=kp.SHARE_ALL, gpu=0):
    return kp.body("shared", h_client=client, h_object=obj, share_type=share_type, gpu=gpu,
                   bytes=nbytes)


class Member:
    """A process of its own (kairosd tells members apart by pid), registered in a
    tenant over the raw protocol, that runs work(client) and keeps its connection
    until the test ends; result() is what work returned."""

    def __init__(self, case, tenant, work):
        r, w = os.pipe()
        hold_r, self.hold_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            code = 1
            try:
                for fd in map(int, os.listdir("/proc/self/fd")):  # the apps' pipes too
                    if fd > 2 and fd not in (w, hold_r):
                        try:
                            os.close(fd)
                        except OSError:
                            pass
                c = Client(case.d.socket, timeout=60)
                c.hello(tenant)
                os.write(w, (json.dumps(work(c)) + "\n").encode())
                os.read(hold_r, 1)  # holds its connection until the test closes the pipe
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        os.close(hold_r)
        self.out = os.fdopen(r)
        case.addCleanup(self.stop)

    def result(self):
        line = self.out.readline()
        assert line, "the member process failed"
        return json.loads(line)

    def stop(self):
        if self.hold_w is not None:
            os.close(self.hold_w)
            self.out.close()
            os.waitpid(self.pid, 0)
            self.hold_w = None


def requests(c, type_, bodies):
    """Sends each body as a request: how many kairosd refused."""
    refused = 0
    for body in bodies:
        try:
            c.request(type_, body)
        except KairosError:
            refused += 1
    return refused


class FloodsAndForgeries(unittest.TestCase):
    """Issue 25, item 2, as an unprivileged tenant plays it: the CUDA IPC tables are
    not one node-wide pool that one tenant fills, a refused import fails in the
    shim, SHAREDs of objects that do not exist make nobody a sharer, and a FREED's
    byte count is bounded by what kairosd charged for the object."""
    setUp, tearDown, ps, held, assert_held, export, importer = (
        LegacyIpc.setUp, LegacyIpc.tearDown, LegacyIpc.ps, LegacyIpc.held,
        LegacyIpc.assert_held, LegacyIpc.export, LegacyIpc.importer)
    assert_the_quota_holds = LegacyIpc.assert_the_quota_holds

    def assert_free_stays_charged(self, a, b, i):
        """b (another tenant) imported a's 10 objects; a frees them: its tenant stays
        charged for what b holds, and the driver never holds more than its quota."""
        self.assertEqual((int(i["n"]), int(i["failed"])), (10, 0))
        self.assertEqual(a.command("free", "ipcapp: freed")["n"], "10")
        self.assertEqual(driver_holds(self.journal), 40 * MiB)  # b keeps it alive
        self.assert_held(40 * MiB)
        self.assert_the_quota_holds()

    def test_a_tenant_that_floods_the_import_table_stops_no_other_import(self):
        """16 processes of one tenant claim 1024 imports each of an object shared with
        everyone (no memory of their own): another tenant's import is still followed,
        and the exporter's free keeps its charge while that import lives."""
        a, e = self.export()
        client, first = int(e["client"], 0), int(e["objects"].split(",")[0], 0)
        claims = [imported_body(kp.IMPORT_BEGIN, client, first, 0x7000 + k)
                  for k in range(1024)]  # KAIROS_IMPORTS_PER_PROCESS
        flood = [Member(self, "mallory", lambda c: requests(c, kp.IMPORTED, claims))
                 for _ in range(16)]
        for m in flood:
            m.result()
        b, i = self.importer(e)
        self.assert_free_stays_charged(a, b, i)
        b.exit()
        a.exit()

    def test_a_refused_import_fails_in_the_shim(self):
        """kairosd refuses an import of memory no member shared (an exporter without
        the shim): the dup fails in the importer, as the driver fails a dup it does
        not allow, with a line saying why; nothing is imported."""
        raw = App(self, None, "export", "-n", "10", "-s", str(4 * MiB))
        e = raw.line("ipcapp: exported")
        b, i = self.importer(e)
        self.assertEqual((int(i["n"]), int(i["failed"])), (0, 10))
        self.assertEqual(int(i["status"]), RM_INSUFFICIENT_PERMISSIONS)
        b.exit()
        self.assertIn("CUDA IPC import refused", b.p.stderr.read())
        self.assertIn("no live member of a tenant reported object", self.d.read_log())
        raw.exit()

    def test_shares_of_objects_that_do_not_exist_make_nobody_a_sharer(self):
        """A member that holds no memory sends 1025 SHAREDs of objects that do not
        exist: it shares nothing another tenant's import could be matched to, so the
        real exporter's free keeps its charge while the import lives."""
        c = Client(self.d.socket)
        self.addCleanup(c.close)
        c.hello("mallory")
        forged = [shared_body(0x7a000001, 0x100 + k) for k in range(1025)]
        refused = requests(c, kp.SHARED, forged)
        a, e = self.export()
        b, i = self.importer(e)
        self.assert_free_stays_charged(a, b, i)
        self.assertGreaterEqual(refused, 1)  # past the bound per process: refused
        # memory it does not hold is not its to share
        self.assertEqual(requests(c, kp.SHARED, [shared_body(0x7a000001, 0x9000, 4 * MiB)]), 1)
        self.assertEqual(self.held("mallory"), 0)
        b.exit()
        a.exit()

    def test_a_forged_free_keeps_no_more_than_was_shared(self):
        """A member shares an object, a process of its tenant imports it, and the
        member says it freed 512 TiB of it: its tenant keeps no more than the object's
        share named, never past its quota."""
        c = Client(self.d.socket)
        self.addCleanup(c.close)
        c.hello("mallory")
        c.request(kp.SHARED, shared_body(0x7a000001, 0x100))  # of no memory
        importer = Member(self, "mallory", lambda m: requests(m, kp.IMPORTED, [
            imported_body(kp.IMPORT_BEGIN, 0x7a000001, 0x100, 0x7b000001)]))
        self.assertEqual(importer.result(), 0)
        c.send(kp.SHARED, freed_body(0x7a000001, 0x100, 1 << 49))
        c.ps()  # its FREED was read
        self.assertEqual(self.held("mallory"), 0)
        # of 4 MiB it holds: no more than 4 MiB kept
        granted, _, _ = c.charge(0, 4 * MiB, token=1)
        self.assertTrue(granted)
        c.commit(0, 1, True, 4 * MiB, 4 * MiB)
        c.request(kp.SHARED, shared_body(0x7a000001, 0x200, 4 * MiB))
        more = Member(self, "mallory", lambda m: requests(m, kp.IMPORTED, [
            imported_body(kp.IMPORT_BEGIN, 0x7a000001, 0x200, 0x7b000001)]))
        self.assertEqual(more.result(), 0)
        c.send(kp.SHARED, freed_body(0x7a000001, 0x200, 1 << 49))
        c.ps()
        self.assertLessEqual(self.held("mallory"), 8 * MiB, self.ps())


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
