#!/usr/bin/env python3
"""kairosd's socket appears only once kairosd listens on it: a client that waits for the
path to exist (as scripts, tests and the GPU benches do) and connects at once is never
refused. kairosd runs with listen() slowed (slow_listen.c), which makes the moment
between bind and listen long enough that a socket bound at its final name would be seen
there, refusing connections, for that long.
Usage: test_socket_ready.py KAIROSD SLOW_LISTEN_SO"""
import os
import socket
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kairos_proto as kp  # noqa: E402
from harness import wait_for  # noqa: E402

KAIROSD, SLOW = sys.argv[1:3]
ASAN_FIRST = os.environ.get("KAIROS_PRELOAD_FIRST", "")
DELAY_MS = 400


class SocketReady(unittest.TestCase):
    def test_the_socket_appears_listening(self):
        env = dict(os.environ, KAIROS_TEST_LISTEN_DELAY_MS=str(DELAY_MS),
                   LD_PRELOAD=" ".join(p for p in (ASAN_FIRST, SLOW) if p))
        d = kp.Daemon(KAIROSD, "  - name: a\n    memory: { 0: 8G }\n", env=env)
        log = open(d.log, "a")
        proc = subprocess.Popen([KAIROSD, "-c", d.config, "-l", d.log_level],
                                stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            # polled as tight as a waiter would
            self.assertTrue(wait_for(lambda: os.path.exists(d.socket) or
                                     proc.poll() is not None, timeout=30, step=0.001),
                            "the socket never appeared")
            self.assertIsNone(proc.poll(), d.read_log())
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                s.connect(d.socket)  # refused if it appeared before listen()
            finally:
                s.close()
            self.assertEqual(os.stat(d.socket).st_mode & 0o777, 0o666)
            leftovers = [n for n in os.listdir(os.path.dirname(d.socket)) if n.endswith(".new")]
            self.assertEqual(leftovers, [])
        finally:
            proc.terminate()
            self.assertEqual(proc.wait(timeout=30), 0, d.read_log())
            log.close()
        self.assertFalse(os.path.exists(d.socket))


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
