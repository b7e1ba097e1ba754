#!/usr/bin/env python3
"""What held a tenant back, end to end with no GPU: kairosd's scheduler over the fake
GPU backend (its util lines), tenants whose processes are Python clients of the
protocol, and the figures as `kairos ps` (HOLD, WHY, --json) and the PS reply show
them: a tenant with a 30 % limit is held back by its limit about 70 % of the time;
a tenant alone on its GPU with only a share is never paused. A kairos and a kairosd
of before still understand each other's PS: an empty PS gets the 1424-byte replies
of before, and kairos, refused by a kairosd that knows no PS body, asks again
without one and shows the holds as unknown.
Usage: test_holds.py KAIROSD KAIROS"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import unittest

import kairos_proto as kp
from harness import wait_for

KAIROSD, KAIROS = sys.argv[1], sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))
FAKE_GPUS = "gpu 0 GPU-fake-0000 85899345920\ngpu 1 GPU-fake-0001 85899345920\n"
TENANTS = ("  - name: capped\n    compute: { 0: { share: 30%, limit: 30% } }\n"
           "  - name: alone\n    compute: { 1: { share: 40% } }\n")


def kairos(test, sock, *args):
    """The output of kairos ARGS --socket sock (test fails when it exits non-zero)."""
    r = subprocess.run([KAIROS, *args, "--socket", sock], capture_output=True, text=True,
                       timeout=30)
    test.assertEqual(r.returncode, 0, r.stderr)
    return r.stdout


def member(sock, tenant):
    """A process that joins tenant and stays until its standard input closes."""
    code = (f"import sys; sys.path.insert(0, {HERE!r}); import kairos_proto as kp; "
            f"c = kp.Client({sock!r}); c.hello({tenant!r}); print('in', flush=True); "
            "sys.stdin.read()")
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline() == "in\n"
    return p


class Holds(unittest.TestCase):
    def setUp(self):
        self.d = kp.Daemon(KAIROSD, TENANTS, fake=FAKE_GPUS).start()
        self.members = [member(self.d.socket, "capped"), member(self.d.socket, "alone")]
        capped, alone = (m.pid for m in self.members)
        # capped uses less than its window (charged the window), alone half its GPU
        self.d.write_fake(FAKE_GPUS + f"util 0 {capped} 25\nutil 1 {alone} 50\n")

    def tearDown(self):
        for m in self.members:
            m.stdin.close()
            m.stdout.close()
            m.wait(10)
        self.d.stop()

    def kairos(self, *args):
        return kairos(self, self.d.socket, *args)

    def hold(self, tenant, gpu):
        """compute.hold of tenant on gpu in kairos ps --json."""
        tenants = json.loads(self.kairos("ps", "--json"))["tenants"]
        return {t["name"]: t for t in tenants}[tenant]["gpus"][gpu]["compute"]["hold"]

    def test_a_limit_holds_its_tenant_back(self):
        # its window is 30 ms of every 100: paused 70 % of every period of the minute
        # (those before its process came included: the limit's window was there)
        self.assertTrue(wait_for(lambda: self.hold("capped", 0)["paused"] is not None, 10))
        h = self.hold("capped", 0)
        self.assertEqual((h["now"], h["why"], h["slices"]), ("limit", "limit", False), h)
        self.assertAlmostEqual(h["paused"], 0.7, delta=0.02)
        limit = h["reasons"]["limit"]
        self.assertEqual(limit["periods"], 1.0)
        self.assertAlmostEqual(limit["paused_seconds_total"], 0.07 * limit["periods_total"],
                               places=6)
        self.assertEqual(h["reasons"]["share"]["paused"], 0.0)
        self.assertEqual(h["reasons"]["none"]["periods"], 0.0)
        out = self.kairos("ps", "-o", "tenant,gpu,share,limit,1min,hold,why")
        self.assertRegex(out, r"TENANT\s+GPU\s+SHARE\s+LIMIT\s+1MIN\s+HOLD\s+WHY\n")
        self.assertRegex(out, r"\ncapped\s+0\s+30\.0%\s+30\.0%\s+30\.0%\s+(69\.\d|70\.0)%\s+limit\n")
        out = self.kairos("top", "--once", "--wide")
        self.assertRegex(out, r"\n  capped .*\s(69\.\d|70\.0)%\s+limit\s")
        # the same as the PS reply carries it, and the totals keep growing
        before = self.d.ps(holds=True)["capped"]["holds"][0]
        self.assertEqual(before["now"], "limit")
        self.assertTrue(wait_for(lambda: self.d.ps(holds=True)["capped"]["holds"][0]["periods"]
                                 ["limit"] > before["periods"]["limit"], 5))

    def test_alone_with_a_share_is_never_paused(self):
        self.assertTrue(wait_for(lambda: self.hold("alone", 1)["paused"] is not None, 10))
        h = self.hold("alone", 1)
        self.assertEqual(h["paused"], 0.0, h)
        for reason in ("share", "limit", "yield"):
            self.assertEqual(h["reasons"][reason]["paused"], 0.0, reason)
            self.assertEqual(h["reasons"][reason]["paused_seconds_total"], 0.0, reason)
        out = self.kairos("ps", "-o", "tenant,gpu,window,pauses,hold")
        self.assertRegex(out, r"\nalone\s+1\s+-\s+0\s+(0\.0%|slices)\n")

    def test_alone_with_a_share_is_held_by_nothing(self):
        """Nobody waits behind a tenant alone on its GPU: in the default time_mode
        (auto) it keeps the driver's own timeslices and no window, so WHY none,
        HOLD 0.0%."""
        self.assertTrue(wait_for(lambda: self.hold("alone", 1)["why"] is not None, 10))
        h = self.hold("alone", 1)
        self.assertEqual((h["now"], h["why"], h["slices"]), ("none", "none", False), h)
        self.assertEqual(h["reasons"]["none"]["periods"], 1.0)
        out = self.kairos("ps", "-o", "tenant,gpu,hold,why")
        self.assertRegex(out, r"\nalone\s+1\s+0\.0%\s+none\n")

    def test_a_kairos_of_before_gets_the_reply_of_before(self):
        # kp's ps() checks each reply's size: 1424 bytes without a body, 3024 with
        old, new = self.d.ps(), self.d.ps(holds=True)
        self.assertNotIn("holds", old["capped"])
        self.assertEqual(old["capped"]["compute"][0]["share"], 300000)
        self.assertEqual(new["capped"]["compute"][0]["share"], 300000)
        self.assertIsNone(new["capped"]["holds"][1])  # no policy on GPU 1
        c = self.d.client()
        try:  # flags this kairosd does not know are refused
            with self.assertRaises(kp.KairosError) as e:
                c.request(kp.PS, kp.body("ps", flags=2))
            self.assertEqual(e.exception.code, kp.ERR_INVALID)
        finally:
            c.close()


class OldDaemon:
    """A kairosd of before on a socket of its own: a PS with a body is refused as its
    exact-size rule refused it (ERROR KAIROS_ERR_PROTOCOL, connection closed); an
    empty PS gets one 1424-byte reply, a tenant with a compute policy on GPU 0."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="kairos-old-")
        self.path = os.path.join(self.dir, "old.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.bind(self.path)
        self.sock.listen(4)
        self.requests = []  # body sizes of the PS requests it got
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def reply_body(self):
        return kp.LAYOUTS["kairos_ps_reply"].pack(  # a reply of before: up to its holds
            stop="hold", flags=kp.PS_LAST, n_gpus=1, tenant="old",
            compute_flags=[kp.PS_COMPUTE_POLICY | kp.PS_COMPUTE_MEASURED], share_ppm=[250000])

    def serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = conn.recv(4096)
                magic, version, type_, size, seq = kp.HDR.unpack_from(data)
                self.requests.append(size)
                if type_ != kp.PS:
                    continue
                if size:
                    msg = b"PS body is %d bytes (header says %d); it must be exactly 0" % (
                        size, size)
                    conn.send(kp.pack(kp.ERROR, kp.body("error", code=kp.ERR_PROTOCOL,
                                                        message=msg), seq))
                    continue
                conn.send(kp.pack(kp.PS_REPLY, self.reply_body(), seq))
                conn.recv(16)  # until the client closes

    def close(self):
        self.sock.close()


class NewKairosOldDaemon(unittest.TestCase):
    def setUp(self):
        self.old = OldDaemon()

    def tearDown(self):
        self.old.close()

    def kairos(self, *args):
        return kairos(self, self.old.path, *args)

    def test_kairos_asks_again_and_shows_the_holds_unknown(self):
        doc = json.loads(self.kairos("ps", "--json"))
        compute = doc["tenants"][0]["gpus"][0]["compute"]
        self.assertEqual((compute["share"], compute["hold"]), (0.25, None))
        self.assertEqual(self.old.requests, [8, 0])  # with the flag, then as before
        out = self.kairos("ps", "-o", "tenant,share,hold,why")
        self.assertRegex(out, r"\nold\s+25\.0%\s+-\s+-\n")
        out = self.kairos("top", "--once", "-o", "tenant,share,hold,why")
        self.assertRegex(out, r"\n  old\s+25\.0%\s+-\s+-\n")


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
