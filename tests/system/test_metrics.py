#!/usr/bin/env python3
"""kairosd's Prometheus endpoint end to end, with no GPU: kairosd with the fake GPU
backend, tenant processes under `kairos run` on the real libkairos.so and the fake
NVIDIA driver; the scrape parsed by prometheus_client's exposition-format parser
and checked against `kairos ps --json` and the fake GPU's figures; a flood of
idle and half-sent HTTP connections (from an unprivileged user) that must not stop
kairosd serving tenants; addresses refused with clear errors.
A scrape is rendered in a forked child while kairosd goes on serving tenants.
Usage: test_metrics.py KAIROSD KAIROS SHIM FAKEDRV FAKEAPP STOPFORK"""
import http.client
import functools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from debian_python import require  # noqa: E402

require("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402
from kairos_proto import Daemon  # noqa: E402
from harness import (ASAN_FIRST, free_port, polling, preload_env, reap,  # noqa: E402
                     start_holding, wait_for)

KAIROSD, KAIROS, SHIM, FAKEDRV, FAKEAPP, STOPFORK = sys.argv[1:7]
# env(**extra): the environment of a program under the shim and the fake driver
env = functools.partial(preload_env, SHIM, FAKEDRV)
MiB = 1 << 20
PAGE = 2 * MiB
TIMEOUT_S = 5  # METRICS_HTTP_TIMEOUT_S
MAX_PER_IP = 8  # METRICS_HTTP_MAX_PER_IP
LIFETIME_S = 10  # METRICS_HTTP_LIFETIME_S
UUID = 'GPU-"odd\\uuid{}'  # a label value that must be escaped
FAKE_GPU = (f"gpu 0 {UUID} 1073741824\n"
            "status 0 123456789 37 12 55 123456\n")


def scrape(port, timeout=5):
    """The families of one scrape: {name: family}, and the raw text."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4"), r.headers
        text = r.read().decode()
    return {f.name: f for f in text_string_to_metric_families(text)}, text


def samples(families, name, **labels):
    """{label tuple without the given labels: value} for the samples of name."""
    fam_name = name[:-len("_total")] if name.endswith("_total") else name
    out = {}
    for s in families[fam_name].samples:
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
            out[tuple(sorted(s.labels.items()))] = s.value
    return out


def value(families, name, **labels):
    found = samples(families, name, **labels)
    assert len(found) == 1, (name, labels, found)
    return next(iter(found.values()))


def tenant_gpu(families, name):
    """{(tenant, gpu): value} for a per-tenant-and-GPU metric."""
    return {(dict(k)["tenant"], int(dict(k)["gpu"])): v
            for k, v in samples(families, name).items()}


class Endpoint(unittest.TestCase):
    def setUp(self):
        self.port = free_port()
        tenants = ("  - name: team\n    memory: { 0: 64M }\n"
                   "    compute: { 0: { share: 40%, limit: 80%, priority: latency } }\n"
                   "  - name: other\n    memory: { 0: 8M }\n"
                   "  - name: idle\n    memory: { 0: 1M }\n")
        self.t0 = time.time()
        self.d = Daemon(KAIROSD, tenants_yaml=tenants, gpus=1, fake=FAKE_GPU,
                        extra=f"metrics: 127.0.0.1:{self.port}\n").start().wait_ready()
        self.procs = []

    def tearDown(self):
        reap(self.procs)
        self.assertEqual(self.d.stop(), 0, self.d.read_log())

    def run_tenant(self, tenant, *args):
        return start_holding(self, [KAIROS, "run", "--tenant", tenant, "--", FAKEAPP, *args],
                             env(**self.d.shim_env()), self.procs)

    def ps(self):
        r = subprocess.run([KAIROS, "ps", "--json", "--socket", self.d.socket],
                           capture_output=True, text=True, env=env(**self.d.shim_env()), timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        return {t["name"]: t for t in json.loads(r.stdout)["tenants"]}

    def test_the_scrape_agrees_with_kairos_ps(self):
        # team: two processes share 64M, the second is refused beyond it; other: one
        self.run_tenant("team", "-n", "20", "-s", str(PAGE), "-c", str(PAGE), "-w", "60")
        self.run_tenant("team", "-n", "20", "-s", str(PAGE), "-c", str(PAGE), "-w", "60")
        self.run_tenant("other", "-n", "2", "-s", str(PAGE), "-c", str(PAGE), "-w", "60")
        self.assertTrue(wait_for(  # until the scheduler has measured a period
            lambda: self.ps()["team"]["gpus"][0]["compute"]["window"] is not None, 5, 0.05))
        before = self.ps()
        fams, text = scrape(self.port)
        after = self.ps()
        self.assertEqual(before["team"]["gpus"][0]["held"], 64 * MiB)
        self.assertGreater(before["team"]["gpus"][0]["refusals"], 0)

        held = tenant_gpu(fams, "kairos_tenant_memory_held_bytes")
        quota = tenant_gpu(fams, "kairos_tenant_memory_quota_bytes")
        refused = tenant_gpu(fams, "kairos_tenant_allocations_refused_total")
        self.assertEqual(set(held), {("team", 0), ("other", 0), ("idle", 0)})
        for name, t in after.items():
            self.assertEqual(value(fams, "kairos_tenant_members", tenant=name), t["processes"])
            self.assertEqual(before[name]["processes"], t["processes"])
            for g in t["gpus"]:
                key = (name, g["index"])
                self.assertEqual(held[key], g["held"], key)
                self.assertEqual(before[name]["gpus"][g["index"]]["held"], g["held"])
                self.assertEqual(quota[key], g["quota"], key)
                # a counter: between the two ps taken around the scrape
                self.assertLessEqual(before[name]["gpus"][g["index"]]["refusals"], refused[key])
                self.assertLessEqual(refused[key], g["refusals"])
        self.assertEqual(value(fams, "kairos_tenant_members", tenant="team"), 2)
        self.assertEqual(value(fams, "kairos_tenants"), len(after))
        self.assertGreaterEqual(value(fams, "kairos_connections"), 3)  # the three shims

        # compute: the policy as ps shows it; the scheduler's figures present where ps
        # has them, as ratios
        c = after["team"]["gpus"][0]["compute"]
        self.assertEqual(value(fams, "kairos_tenant_compute_share_ratio", tenant="team"),
                         c["share"])
        self.assertEqual(value(fams, "kairos_tenant_compute_limit_ratio", tenant="team"),
                         c["limit"])
        self.assertEqual(value(fams, "kairos_tenant_compute_priority_info", tenant="team",
                               priority=c["priority"]), 1)
        for name in ("kairos_tenant_compute_target_ratio", "kairos_tenant_compute_achieved_ratio",
                     "kairos_tenant_compute_achieved_minute_ratio"):
            self.assertTrue(0 <= value(fams, name, tenant="team") <= 1, name)
        w0, w1 = before["team"]["gpus"][0]["compute"]["windowed"], c["windowed"]
        if w0 == w1:  # the window did not change around the scrape: the same one
            period = value(fams, "kairos_tenant_window_period_seconds", tenant="team")
            duty = value(fams, "kairos_tenant_window_duty_seconds", tenant="team")
            self.assertEqual((period, duty), (w1["period_us"] / 1e6, w1["duty_us"] / 1e6)
                             if w1 else (0, 0))
        pauses = value(fams, "kairos_tenant_pauses_total", tenant="team")
        self.assertLessEqual(before["team"]["gpus"][0]["compute"]["pauses"], pauses)
        self.assertLessEqual(pauses, c["pauses"])
        # what held it back: counters between the two ps, per reason; the reason now
        h0, h1 = before["team"]["gpus"][0]["compute"]["hold"], c["hold"]
        for reason, r1 in h1["reasons"].items():
            r0 = h0["reasons"][reason]
            periods = value(fams, "kairos_tenant_compute_periods_total", tenant="team",
                            reason=reason)
            self.assertTrue(r0["periods_total"] <= periods <= r1["periods_total"], reason)
            if reason == "none":
                continue  # no time paused for nothing
            paused = value(fams, "kairos_tenant_compute_held_seconds_total", tenant="team",
                           reason=reason)
            self.assertTrue(r0["paused_seconds_total"] - 1e-6 <= paused
                            <= r1["paused_seconds_total"] + 1e-6, reason)
        if h0["now"] == h1["now"]:
            self.assertEqual(value(fams, "kairos_tenant_compute_hold_info", tenant="team",
                                   reason=h1["now"]), 1)
        self.assertEqual(fams["kairos_tenant_compute_held_seconds"].type, "counter")
        self.assertNotIn("other", {dict(k)["tenant"] for k in
                                   samples(fams, "kairos_tenant_compute_share_ratio")})
        self.assertEqual(fams["kairos_tenant_pauses"].type, "counter")
        self.assertEqual(fams["kairos_tenant_allocations_refused"].type, "counter")
        self.assertEqual(fams["kairos_tenant_memory_held_bytes"].type, "gauge")

        # the GPU as the backend reports it; its odd UUID survives the escaping
        self.assertEqual(value(fams, "kairos_gpu_info", gpu="0", uuid=UUID, backend="fake"), 1)
        self.assertEqual(value(fams, "kairos_gpu_memory_used_bytes", gpu="0"), 123456789)
        self.assertEqual(value(fams, "kairos_gpu_memory_total_bytes", gpu="0"), 1 << 30)
        self.assertAlmostEqual(value(fams, "kairos_gpu_utilization_ratio", gpu="0"), 0.37)
        self.assertAlmostEqual(value(fams, "kairos_gpu_memory_utilization_ratio", gpu="0"), 0.12)
        self.assertEqual(value(fams, "kairos_gpu_temperature_celsius", gpu="0"), 55)
        self.assertAlmostEqual(value(fams, "kairos_gpu_power_watts", gpu="0"), 123.456)

        # kairosd itself
        version = subprocess.run([KAIROSD, "--version"], capture_output=True,
                                 text=True).stdout.split()[1]
        self.assertEqual(value(fams, "kairos_build_info", version=version), 1)
        self.assertEqual(value(fams, "kairos_up"), 1)
        self.assertTrue(self.t0 - 1 <= value(fams, "kairos_start_time_seconds") <= time.time())
        for f in fams.values():
            self.assertTrue(f.documentation, f.name)  # every family has its HELP

    def test_figures_follow_the_tenants(self):
        """A process leaving shows in the next scrape; an unknown GPU figure has no
        sample (not a 0)."""
        p = self.run_tenant("other", "-n", "2", "-s", str(PAGE), "-c", str(PAGE), "-w", "60")
        for _ in polling(5, 0.01):  # the shim reports what it holds within ms
            fams, _ = scrape(self.port)
            held = value(fams, "kairos_tenant_memory_held_bytes", tenant="other")
            if held == 6 * MiB:
                break
        self.assertEqual(held, 6 * MiB)
        p.kill()
        p.communicate()
        for _ in polling(5):
            fams, _ = scrape(self.port)
            if value(fams, "kairos_tenant_members", tenant="other") == 0:
                break
        self.assertEqual(value(fams, "kairos_tenant_members", tenant="other"), 0)
        self.assertEqual(value(fams, "kairos_tenant_memory_held_bytes", tenant="other"), 0)
        self.d.write_fake(f"gpu 0 {UUID} 1073741824\nstatus 0 - - - 40 -\n")
        fams, _ = scrape(self.port)
        self.assertEqual(samples(fams, "kairos_gpu_memory_used_bytes"), {})
        self.assertEqual(samples(fams, "kairos_gpu_utilization_ratio"), {})
        self.assertEqual(samples(fams, "kairos_gpu_power_watts"), {})
        self.assertEqual(value(fams, "kairos_gpu_temperature_celsius", gpu="0"), 40)

    def test_other_paths_and_methods_are_refused(self):
        base = f"http://127.0.0.1:{self.port}"
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(base + "/nope", timeout=5)
        self.assertEqual(e.exception.code, 404)
        self.assertIn(b"/metrics", e.exception.read())
        req = urllib.request.Request(base + "/metrics", data=b"x" * 100000, method="POST")
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=5)
        self.assertEqual(e.exception.code, 405)
        self.assertEqual(e.exception.headers["Allow"], "GET, HEAD")
        # a request line and headers beyond the connection's memory: refused, kairosd lives
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 65536 + b"\r\n\r\n")
            reply = s.recv(100)
        self.assertFalse(reply.startswith(b"HTTP/1.1 200"), reply)
        self.assertTrue(self.d.alive())
        scrape(self.port)

    def connect(self, i):
        s = socket.socket()
        s.settimeout(10)
        s.connect(("127.0.0.1", self.port))
        if i % 2:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # never finished
        return s

    def flood_sockets(self, n):
        """n connections to the endpoint, made as an unprivileged user when the test
        runs as root (any local user can reach the address), passed back here: half
        idle, half with a request begun and never finished."""
        if os.getuid() != 0:
            return [self.connect(i) for i in range(n)]
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        child = os.fork()
        if child == 0:
            a.close()
            code = 1
            try:
                os.setgid(65534)
                os.setuid(65534)
                socks = [self.connect(i) for i in range(n)]
                for i in range(0, n, 64):
                    socket.send_fds(b, [b"x"], [s.fileno() for s in socks[i:i + 64]])
                code = 0
            except BaseException as e:  # noqa: BLE001
                print("flood:", e, file=sys.stderr)
            os._exit(code)
        b.close()
        socks = []
        while len(socks) < n:
            _, fds, _, _ = socket.recv_fds(a, 16, 64)
            if not fds:
                break
            socks += [socket.socket(fileno=fd) for fd in fds]
        _, status = os.waitpid(child, 0)
        a.close()
        self.assertEqual(status, 0)
        self.assertEqual(os.stat(f"/proc/self/fd/{socks[0].fileno()}").st_mode & 0o170000,
                         0o140000)
        return socks

    @staticmethod
    def open_ones(socks, at_most, seconds):
        """Waits up to seconds until at most at_most of socks are still open (not
        closed or reset by kairosd); returns those still open."""
        for _ in polling(seconds):
            still = []
            for s in socks:
                s.setblocking(False)
                try:
                    if s.recv(4096) != b"":
                        still.append(s)  # an answer (408...): the close comes next
                except BlockingIOError:
                    still.append(s)
                except ConnectionError:
                    pass
            socks = still
            if len(socks) <= at_most:
                break
        return socks

    def drip(self, result):
        """A client that sends a request one header line every 0.4 s, never idle long
        enough for the idle timeout; result gets how long kairosd let it last."""
        s = socket.create_connection(("127.0.0.1", self.port), timeout=0.4,
                                     source_address=("127.0.0.3", 0))
        t0 = time.monotonic()
        try:
            s.sendall(b"GET /metrics HTTP/1.1\r\n")
            while time.monotonic() - t0 < LIFETIME_S + 10:
                s.sendall(b"X: y\r\n")
                try:
                    if s.recv(4096) == b"":
                        break
                except socket.timeout:
                    pass
        except OSError:
            pass
        result.append(time.monotonic() - t0)
        s.close()

    def test_a_flood_of_http_connections_does_not_stop_the_tenants(self):
        dripped = []
        dripper = threading.Thread(target=self.drip, args=(dripped,))
        dripper.start()
        socks = self.flood_sockets(200)
        try:
            # beyond the limit per client address, closed at once
            self.assertLessEqual(len(self.open_ones(socks, MAX_PER_IP, 3)), MAX_PER_IP)
            # another client address is still served (Prometheus on another host)
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5,
                                              source_address=("127.0.0.2", 0))
            conn.request("GET", "/metrics")
            self.assertEqual(conn.getresponse().status, 200)
            conn.close()
            # tenants are served at once: ps, a new tenant process and its quota
            t0 = time.monotonic()
            for _ in range(5):
                self.ps()
            ps_s = (time.monotonic() - t0) / 5
            self.run_tenant("team", "-n", "40", "-s", str(PAGE), "-c", str(PAGE), "-w", "60")
            self.assertEqual(self.ps()["team"]["gpus"][0]["held"], 64 * MiB)
            self.assertLess(ps_s, 1.0)
            print(f"kairos ps during the flood: {ps_s * 1000:.0f} ms", file=sys.stderr)
            # the rest, idle or half-sent, are closed within the idle timeout
            left = self.open_ones(socks, 0, TIMEOUT_S + 3)
            self.assertEqual(len(left), 0, f"{len(left)} connection(s) still open")
            # the one never idle, at its lifetime
            dripper.join(LIFETIME_S + 12)
            self.assertTrue(dripped and LIFETIME_S - 0.5 < dripped[0] < LIFETIME_S + 3, dripped)
        finally:
            for s in socks:
                s.close()
        fams, _ = scrape(self.port)  # and the endpoint serves from here again
        self.assertEqual(value(fams, "kairos_up"), 1)
        self.assertTrue(self.d.alive())
        log = self.d.read_log()
        self.assertLess(log.count("metrics endpoint:"), 5, log[-2000:])  # rate-limited


def children(pid):
    """{pid: state letter} of pid's children, from /proc."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out[int(entry)] = fields[0]
    return out


class RenderOffTheLoop(unittest.TestCase):
    """A scrape's text is rendered by a child of kairosd, never in its loop: with
    every child kairosd forks stopped at birth (the STOPFORK preload), a scrape
    waits while tenants are served as usual; the child's end delivers the scrape,
    and a renderer that dies fails that scrape only (503)."""

    def setUp(self):
        self.port = free_port()
        e = dict(os.environ)
        e["LD_PRELOAD"] = " ".join(p for p in (ASAN_FIRST, STOPFORK) if p)
        e["ASAN_OPTIONS"] = "detect_leaks=0:verify_asan_link_order=0"
        self.d = Daemon(KAIROSD, tenants_yaml="  - name: team\n    memory: { 0: 64M }\n",
                        gpus=1, fake=FAKE_GPU, extra=f"metrics: 127.0.0.1:{self.port}\n",
                        env=e).start().wait_ready()
        self.procs = []

    def tearDown(self):
        for pid in children(self.d.proc.pid):
            os.kill(pid, signal.SIGKILL)
        reap(self.procs)
        self.assertEqual(self.d.stop(), 0, self.d.read_log())

    def scrape_in_background(self):
        result = {}

        def go():
            try:
                result["families"], result["text"] = scrape(self.port, timeout=60)
            except urllib.error.HTTPError as e:
                result["status"], result["body"] = e.code, e.read().decode()
        t = threading.Thread(target=go)
        t.start()
        return t, result

    def stopped_renderer(self):
        for _ in polling(10, 0.01):
            stopped = [p for p, st in children(self.d.proc.pid).items() if st == "T"]
            if stopped:
                return stopped[0]
        self.fail("no renderer was forked for the scrape:\n" + self.d.read_log()[-2000:])

    def test_tenants_are_served_while_a_scrape_renders(self):
        t, result = self.scrape_in_background()
        renderer = self.stopped_renderer()
        # kairosd's loop is free: a tenant process gets its memory, ps answers
        p = subprocess.run([KAIROS, "run", "--tenant", "team", "--", FAKEAPP, "-n", "2", "-s",
                            str(PAGE), "-c", str(PAGE)], capture_output=True, text=True,
                           env=env(**self.d.shim_env()), timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        r = subprocess.run([KAIROS, "ps", "--json", "--socket", self.d.socket],
                           capture_output=True, text=True, env=env(**self.d.shim_env()), timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(t.is_alive(), "the scrape did not wait for its renderer")
        os.kill(renderer, signal.SIGCONT)
        t.join(60)
        self.assertEqual(value(result["families"], "kairos_up"), 1)
        self.assertEqual(value(result["families"], "kairos_tenants"), 1)

    def test_a_renderer_that_dies_fails_its_scrape_only(self):
        t, result = self.scrape_in_background()
        os.kill(self.stopped_renderer(), signal.SIGKILL)
        t.join(60)
        self.assertEqual(result.get("status"), 503, result)
        self.assertIn("could not be rendered", result["body"])
        t, result = self.scrape_in_background()  # the next scrape gets a render of its own
        os.kill(self.stopped_renderer(), signal.SIGCONT)
        t.join(60)
        self.assertEqual(value(result["families"], "kairos_up"), 1)
        self.assertIn("the renderer ended by signal 9", self.d.read_log())


class DriverRelease(unittest.TestCase):
    """kairosd reads the node's driver release from the GPU backend at start (the fake
    GPU file's "driver" line stands for NVML's): said in its log, loudly when the
    shims will refuse GPU use, and in kairos_driver_supported."""

    def release(self, line):
        port = free_port()
        d = Daemon(KAIROSD, gpus=1, fake=FAKE_GPU + line,
                   extra=f"metrics: 127.0.0.1:{port}\n").start().wait_ready()
        try:
            fams, _ = scrape(port)
            return fams, d.read_log()
        finally:
            self.assertEqual(d.stop(), 0, d.read_log())

    def test_the_branch_built_for(self):
        fams, log = self.release("driver 580.159.04\n")
        self.assertEqual(value(fams, "kairos_driver_supported", version="580.159.04"), 1)
        self.assertIn("NVIDIA driver 580.159.04: a branch Kairos reads", log)

    def test_another_release_is_said_loudly(self):
        fams, log = self.release("driver 590.44.01\n")
        self.assertEqual(value(fams, "kairos_driver_supported", version="590.44.01"), 0)
        self.assertIn("NVIDIA driver 590.44.01 is not a release this Kairos was built for", log)
        self.assertIn("docs/drivers.md", log)

    def test_an_unreadable_release_is_not_supported(self):
        fams, log = self.release("driver banana\n")
        self.assertEqual(value(fams, "kairos_driver_supported", version="banana"), 0)
        self.assertIn("NVIDIA driver banana is not a release", log)

    def test_no_figure_where_the_backend_tells_none(self):
        fams, _ = self.release("")
        self.assertNotIn("kairos_driver_supported", fams)


class Addresses(unittest.TestCase):
    def test_off_unless_configured(self):
        d = Daemon(KAIROSD, gpus=1).start()
        try:
            self.assertNotIn("metrics at", d.read_log())
        finally:
            d.stop()

    def test_a_bad_address_is_refused_with_its_position(self):
        d = Daemon(KAIROSD, gpus=1, extra="metrics: 127.0.0.1:99999\n")
        r = subprocess.run([KAIROSD, "-c", d.config, "--check"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn(":5:10: metrics address '127.0.0.1:99999' is not an address such as "
                      "127.0.0.1:9494", r.stderr)
        r = subprocess.run([KAIROSD, "-c", d.config, "--metrics", "localhost"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--metrics: metrics address 'localhost' is not", r.stderr)

    def test_a_port_in_use_stops_kairosd_with_a_clear_error(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen()
            port = s.getsockname()[1]
            d = Daemon(KAIROSD, gpus=1)
            r = subprocess.run([KAIROSD, "-c", d.config, "--metrics", f"127.0.0.1:{port}"],
                               capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"cannot serve metrics on 127.0.0.1:{port}", r.stderr)
        self.assertIn("choose another address", r.stderr)

    def serve(self, address, url):
        """kairosd with --metrics address over a configuration with metrics off; the
        families scraped from url."""
        d = Daemon(KAIROSD, gpus=1, extra="metrics: off\n")
        proc = subprocess.Popen([KAIROSD, "-c", d.config, "--metrics", address],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            for _ in polling(10):
                try:
                    with urllib.request.urlopen(url, timeout=5) as r:
                        return {f.name: f for f in text_string_to_metric_families(r.read().decode())}
                except OSError:
                    self.assertIsNone(proc.poll())
            self.fail(f"no answer at {url} within 10 s")
        finally:
            proc.terminate()
            proc.communicate(timeout=10)
            self.assertEqual(proc.returncode, 0)

    def test_the_option_overrides_the_configuration(self):
        port = free_port()
        fams = self.serve(f"127.0.0.1:{port}", f"http://127.0.0.1:{port}/metrics")
        self.assertEqual(value(fams, "kairos_tenants"), 0)

    def test_an_ipv6_address(self):
        try:
            with socket.socket(socket.AF_INET6) as s:
                s.bind(("::1", 0))
                port = s.getsockname()[1]
        except OSError:
            self.skipTest("no IPv6 loopback on this machine")
        fams = self.serve(f"[::1]:{port}", f"http://[::1]:{port}/metrics")
        self.assertEqual(value(fams, "kairos_up"), 1)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
