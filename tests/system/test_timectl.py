#!/usr/bin/env python3
"""Time control end to end, with no GPU: a stand-in daemon (this script) pushes
TIME_POLICY on the shim's connection, once just before the answer to the first
allocation's CREDIT request (while an allocation waits for it) and once while the
process is idle (the watcher reads both); the real libkairos.so applies it to fakeapp's channel group and channels on
the fake driver, which logs the controls (FAKEDRV_CTL_LOG).
Usage: test_timectl.py SHIM FAKEDRV FAKEAPP"""
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kairos_proto as kp  # noqa: E402
from kairos_proto import HDR, MAGIC, VERSION, pack, shim_env_at  # noqa: E402
from harness import pass_time  # noqa: E402

SHIM, FAKEDRV, FAKEAPP = sys.argv[1:4]
ASAN_FIRST = os.environ.get("KAIROS_PRELOAD_FIRST", "")
HELLO, CHARGE, WELCOME, GRANT, TIME_POLICY, CREDIT = (kp.HELLO, kp.CHARGE, kp.WELCOME, kp.GRANT,
                                                      kp.TIME_POLICY, kp.CREDIT)


def policy(seq, timeslice_us, period_us=0, duty_us=0, phase_us=0, epoch_ns=0, gpu=0):
    return kp.body("time_policy", gpu=gpu, seq=seq, timeslice_us=timeslice_us,
                   epoch_ns=epoch_ns, period_us=period_us, phase_us=phase_us, duty_us=duty_us)


class FakeDaemon(threading.Thread):
    """Answers HELLO, CHARGE and CREDIT (granting what is asked); pushes the first
    policy just before the first answer to an allocation."""

    def __init__(self, path, first_push):
        super().__init__(daemon=True)
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.srv.bind(path)
        self.srv.listen(1)
        self.first_push = first_push
        self.conn = None
        self.ready = threading.Event()

    def run(self):
        self.conn, _ = self.srv.accept()
        pushed = False
        while True:
            try:
                data = self.conn.recv(4096)
            except OSError:
                return
            if not data:
                return
            magic, version, type_, size, seq = HDR.unpack_from(data)
            assert magic == MAGIC and version == VERSION
            if type_ == HELLO:
                self.conn.send(pack(WELCOME, kp.body("welcome", tenant_id=1, n_gpus=1,
                                                     quota=[1 << 40]), seq))
                self.ready.set()
            elif type_ == kp._C["KAIROS_MSG_ROUTE"]:  # a time tenant: no MPS
                self.conn.send(pack(kp._C["KAIROS_MSG_ROUTED"], kp.body("routed"), seq))
            elif type_ == CHARGE:
                nbytes = kp.fields("charge", data[HDR.size:])["bytes"]
                if not pushed:
                    self.conn.send(pack(TIME_POLICY, self.first_push, 1000))
                    pushed = True
                self.conn.send(pack(GRANT, kp.body("grant", granted=1, quota=1 << 40,
                                                   held=nbytes), seq))
            elif type_ == CREDIT:
                f = kp.fields("credit", data[HDR.size:])
                if f["need"] and not pushed:
                    self.conn.send(pack(TIME_POLICY, self.first_push, 1000))
                    pushed = True
                self.conn.send(pack(CREDIT, kp.body(
                    "credit", gpu=f["gpu"], report=f["report"], held=f["held"], need=f["need"],
                    least=2 << 20, quota=1 << 40), seq))

    def push(self, body):
        self.conn.send(pack(TIME_POLICY, body, 1001))


class Push(unittest.TestCase):
    def test_policies_pushed_at_any_time_are_applied(self):
        with tempfile.TemporaryDirectory() as d:
            sock, log = os.path.join(d, "k.sock"), os.path.join(d, "ctl.log")
            daemon = FakeDaemon(sock, policy(1, 5000))
            daemon.start()
            e = {k: v for k, v in os.environ.items() if not k.startswith("KAIROS_")}
            e.update(LD_PRELOAD=" ".join(p for p in (ASAN_FIRST, SHIM, FAKEDRV) if p),
                     ASAN_OPTIONS="detect_leaks=0:verify_asan_link_order=0",
                     KAIROS_TENANT="t1", FAKEDRV_CTL_LOG=log, **shim_env_at(d, sock))
            app = subprocess.Popen([FAKEAPP, "-n", "2", "-s", str(2 << 20), "-w", "2"],
                                   env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
            self.assertTrue(daemon.ready.wait(10))
            pass_time(0.8, "the allocations are done (-w 2 keeps it idle after them)")
            daemon.push(policy(2, 7000, period_us=100000, duty_us=50000,
                               epoch_ns=time.monotonic_ns()))
            out, err = app.communicate(timeout=60)
            self.assertEqual(app.returncode, 0, err)
            lines = open(log).read().splitlines()
            ts = [l for l in lines if l.startswith("timeslice")]
            dis = [l for l in lines if l.startswith("disable")]
            self.assertTrue(any("us=5000 status=0" in l for l in ts), lines)
            self.assertTrue(any("us=7000 status=0" in l for l in ts), lines)
            self.assertTrue(all("status=0" in l for l in lines), lines)
            on = [l for l in dis if " disable=1 " in l]
            off = [l for l in dis if " disable=0 " in l]
            # ~1.2 s of 100 ms windows at 50 %: about a dozen pauses and resumes
            self.assertGreaterEqual(len(on), 5, lines)
            self.assertGreaterEqual(len(off), 5, lines)
            self.assertTrue(all(" n=2 " in l for l in dis), lines)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
