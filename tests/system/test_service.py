#!/usr/bin/env python3
"""kairosd under a service manager, played by this test: sd_notify's READY=1 arrives
on a NOTIFY_SOCKET the test owns once kairosd's socket accepts, STOPPING=1 on
SIGTERM, WATCHDOG=1 pings at half of WATCHDOG_USEC (none without it, none when
WATCHDOG_PID names another process); log lines go to the journal (a datagram socket
the test binds at /run/systemd/journal/socket in a private mount namespace) with
PRIORITY and TENANT=, PID=, GPU= fields when asked (--log journal) or when stderr
is the journal's stream (JOURNAL_STREAM), and to stderr otherwise.
Usage: test_service.py KAIROSD"""
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kairos_proto import Client, Daemon  # noqa: E402
from harness import datagram_socket, polling, reap  # noqa: E402

KAIROSD = sys.argv[1]
TENANTS = "  - name: team\n    memory: { 0: 8M }\n"
MiB = 1 << 20


def messages_raw(sock, until, timeout=10.0):
    """Datagrams until one satisfies until(data) or the time is up."""
    got = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            got.append(sock.recv(65536))
        except socket.timeout:
            break
        if until(got[-1]):
            break
    return got


def messages(sock, until, timeout=10.0):
    """Datagrams (decoded) until one satisfies until(text) or the time is up."""
    return [m.decode() for m in messages_raw(sock, lambda m: until(m.decode()), timeout)]


def journal_fields(data):
    """One entry of the journal's native protocol: KEY=value lines, or KEY, a
    64-bit little-endian size and the value for values with a newline."""
    fields, i = {}, 0
    while i < len(data):
        nl = data.index(b"\n", i)
        line = data[i:nl]
        if b"=" in line:
            k, v = line.split(b"=", 1)
            i = nl + 1
        else:
            k, (size,) = line, struct.unpack_from("<Q", data, nl + 1)
            v = data[nl + 9:nl + 9 + size]
            i = nl + 9 + size + 1
        fields[k.decode()] = v.decode()
    return fields


class Notify(unittest.TestCase):
    def setUp(self):
        self.d = Daemon(KAIROSD, tenants_yaml=TENANTS, gpus=1)
        self.notify_path = os.path.join(self.d.dir, "notify")
        self.notify = datagram_socket(self.notify_path)
        self.proc = None

    def tearDown(self):
        if self.proc:
            reap([self.proc])
        self.notify.close()
        shutil.rmtree(self.d.dir, ignore_errors=True)

    def start(self, **env):
        e = dict(os.environ, NOTIFY_SOCKET=self.notify_path, **env)
        self.proc = subprocess.Popen([KAIROSD, "-c", self.d.config, "--log", "stderr"], env=e,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def test_ready_once_the_socket_accepts_and_stopping_on_sigterm(self):
        self.start()
        got = messages(self.notify, lambda m: "READY=1" in m)
        self.assertTrue(got and "READY=1" in got[-1], got)
        Client(self.d.socket, timeout=1).close()  # not polled before: READY meant it
        self.assertIn("STATUS=1 tenant(s), 1 GPU(s)", got[-1])
        self.assertFalse(any("WATCHDOG=1" in m for m in got))  # no WATCHDOG_USEC
        self.proc.send_signal(signal.SIGTERM)
        got = messages(self.notify, lambda m: "STOPPING=1" in m)
        self.assertTrue(got and "STOPPING=1" in got[-1], got)
        self.assertEqual(self.proc.wait(10), 0)

    def test_watchdog_pings_from_the_loop(self):
        self.start(WATCHDOG_USEC="200000")
        self.assertTrue(messages(self.notify, lambda m: "READY=1" in m))
        got = messages(self.notify, lambda m: False, timeout=1.0)
        pings = sum(m == "WATCHDOG=1" for m in got)
        print(f"watchdog: {pings} pings in 1 s (WATCHDOG_USEC=200000)", file=sys.stderr)
        self.assertGreaterEqual(pings, 7, got)   # one every 100 ms
        self.assertLessEqual(pings, 12, got)
        # a stopped loop stops the pings: that is what lets systemd restart kairosd
        self.proc.send_signal(signal.SIGSTOP)
        messages(self.notify, lambda m: False, timeout=0.15)  # drain what was in flight
        self.assertEqual(messages(self.notify, lambda m: False, timeout=0.5), [])
        self.proc.send_signal(signal.SIGCONT)
        self.assertIn("WATCHDOG=1", messages(self.notify, lambda m: m == "WATCHDOG=1"))

    def test_no_pings_when_the_watchdog_is_for_another_process(self):
        self.start(WATCHDOG_USEC="100000", WATCHDOG_PID="1")
        self.assertTrue(messages(self.notify, lambda m: "READY=1" in m))
        got = messages(self.notify, lambda m: False, timeout=0.5)
        self.assertFalse(any("WATCHDOG=1" in m for m in got), got)


def can_unshare_mounts():
    r = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    return r.returncode == 0


@unittest.skipUnless(can_unshare_mounts(), "needs a private mount namespace (root)")
class Journal(unittest.TestCase):
    """kairosd in a mount namespace whose /run is a directory of the test's, so that
    libsystemd's /run/systemd/journal/socket is the test's socket."""

    def setUp(self):
        self.d = Daemon(KAIROSD, tenants_yaml=TENANTS, gpus=1,
                        fake="gpu 0 GPU-fake-0000 1073741824\n")
        self.run_dir = os.path.join(self.d.dir, "fake-run")
        os.makedirs(os.path.join(self.run_dir, "systemd", "journal"))
        self.journal = datagram_socket(os.path.join(self.run_dir, "systemd", "journal", "socket"))
        self.proc = None

    def tearDown(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(10)
        self.journal.close()
        shutil.rmtree(self.d.dir, ignore_errors=True)

    def start(self, *options, stderr=None, env=None):
        script = 'mount --bind "$0" /run && exec "$@"'
        self.proc = subprocess.Popen(
            ["unshare", "-m", "sh", "-c", script, self.run_dir, KAIROSD, "-c", self.d.config,
             "--fake-gpu", self.d.fake, *options],
            stdout=subprocess.DEVNULL, stderr=stderr or subprocess.DEVNULL,
            env=dict(os.environ, **(env or {})))
        for _ in polling(10, 0.02):
            try:
                Client(self.d.socket, timeout=1).close()
                return
            except OSError:
                pass
        self.fail("kairosd did not start")

    def entries(self, until):
        out = []
        for raw in messages_raw(self.journal, lambda data: until(journal_fields(data))):
            out.append(journal_fields(raw))
        return out

    def test_entries_have_priorities_and_fields(self):
        self.start("--log", "journal")
        ready = self.entries(lambda f: "ready" in f.get("MESSAGE", ""))
        self.assertTrue(ready, "no entry in the journal")
        self.assertEqual(ready[-1]["SYSLOG_IDENTIFIER"], "kairosd")
        self.assertEqual(ready[-1]["PRIORITY"], "6")
        self.assertNotIn("TENANT", ready[-1])
        c = Client(self.d.socket)
        c.hello("team")
        granted, _, _ = c.charge(0, 16 * MiB)
        self.assertFalse(granted)
        got = self.entries(lambda f: "refused" in f.get("MESSAGE", ""))
        joined = next(f for f in got if "joined" in f["MESSAGE"])
        self.assertEqual((joined["TENANT"], joined["PID"]), ("team", str(os.getpid())))
        refused = got[-1]
        self.assertEqual((refused["TENANT"], refused["PID"], refused["GPU"], refused["PRIORITY"]),
                         ("team", str(os.getpid()), "0", "6"))
        c.close()
        other = Client(self.d.socket)
        with self.assertRaises(Exception):
            other.hello("nosuch")
        other.close()
        got = self.entries(lambda f: "no tenant" in f.get("MESSAGE", ""))
        self.assertEqual((got[-1]["TENANT"], got[-1]["PRIORITY"]), ("nosuch", "4"))  # a warning

    def test_auto_follows_journal_stream(self):
        with tempfile.TemporaryFile() as err:
            st = os.fstat(err.fileno())
            self.start(stderr=err, env={"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"})
            self.assertTrue(self.entries(lambda f: "ready" in f.get("MESSAGE", "")))
            err.seek(0)
            self.assertEqual(err.read(), b"")  # nothing on stderr: it is the journal's
        self.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.proc.wait(10), 0)
        with tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as elsewhere:
            st = os.fstat(elsewhere.fileno())  # JOURNAL_STREAM names another file
            self.start(stderr=err, env={"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"})
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(10)
            err.seek(0)
            self.assertIn(b"ready", err.read())


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
