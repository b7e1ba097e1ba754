#!/usr/bin/env python3
"""The compute-isolation benchmark (issue 4), run by scripts/gpu-suite compute.

Every mix runs twice in the same invocation, natively (the driver's own
time-slicing) and under kairosd, after every kind of tenant ran alone (solo). Each
tenant writes the time every unit of its work ended (kernel_stream: every kernel,
stamped on the GPU; torch_tenant.py: every step or request). A unit's GPU time is
what it costs alone (solo seconds / solo units), spread over the interval since the
tenant's previous unit ended; summed per 100 ms window this gives the GPU time each
tenant really got in that window, whatever its kind.

Reported per mix and mode: per-window share error p50/p95 against the targets (the
shares normalised over the tenants that compete), the run's error, the aggregate
throughput (sum over tenants of their fraction of solo); the overhead of a lone
tenant under Kairos; pause/resume cost (from the shim's exit report). Inference
latency next to training is the latency section's (tests/gpu/latency_bench.py).
Issue 11 cases: lending (an idle PyTorch process that holds a context next to a
deep kernel stream; a tenant that idles, then runs: how soon it has its share
back), long kernels (170 ms work-bounded kernels under a 30 % limit, alone and next
to a deep tenant: work done as a fraction of solo, the SM clock beside solo's),
bursty inference (share 50 %, busy spells and idle ones) next to training: its part
of the busy time in its spells, what training gets while it idles; and every tenant
of every run must end by itself (a lost doorbell ring would hang one: "failures"
in the results).
Writes OUT/compute-results.json and prints a table last.
Usage: compute_bench.py --bin DIR --out DIR [--seconds S] [--only NAME,...]
                        [--modes native,kairos-timeslices,kairos-windows]
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

WINDOW_NS = 100_000_000
SKIP_NS = 1_500_000_000   # the first 1.5 s: policies arrive and settle
TAIL_NS = 300_000_000     # the last 0.3 s: tenants stop at slightly different times

KERNEL_KINDS = ("deep", "shallow", "deep-late", "bursty")  # units are single short kernels
STREAM_KINDS = KERNEL_KINDS + ("long",)                     # kernel_stream tenants
TORCH_KINDS = ("matmul", "train", "infer", "idle")
LONG_WORK = 100_000_000  # FMAs per thread: about 170 ms per kernel on the H200
BURST_MS, IDLE_MS = 400, 300  # the bursty tenant: busy spells and idle ones


def base_kind(kind):
    """The kind whose solo run gives this one's unit cost."""
    return "deep" if kind in ("deep-late", "bursty") else kind


def long_seconds(seconds):
    """Runs with 170 ms kernels: at 30 % one ends every ~0.6 s, so a few seconds
    hold too few kernels to measure a rate (4 s runs gave ~4)."""
    return max(2 * seconds, 8.0)
HERE = os.path.dirname(os.path.abspath(__file__))


class Kinds:
    """How to run each kind of tenant, and how long it needs to get ready."""

    def __init__(self, bindir, python):
        self.stream = os.path.join(bindir, "kernel_stream")
        self.python = python

    def command(self, kind, seconds, start_at, stamps):
        if kind == "deep-late":  # alive from the start, idle for the first half
            start_at, seconds = start_at + seconds / 2, seconds / 2
        if kind in STREAM_KINDS:
            # bursty: deep in its spells (the simulator's bursty load; a server with
            # requests queued back to back), its edges blurred by one batch (26 ms)
            batch = "256" if kind in ("deep", "deep-late", "bursty") else "8"
            spin = ["--work", str(LONG_WORK)] if kind == "long" else []
            if kind == "bursty":
                spin = ["--burst-ms", str(BURST_MS), "--idle-ms", str(IDLE_MS)]
            return [self.stream, "--seconds", str(seconds), "--alloc-mib", "64", "--batch", batch,
                    "--start-at", f"{start_at:.3f}", "--stamps", stamps] + spin
        return [self.python, os.path.join(HERE, "torch_tenant.py"), "--kind", kind,
                "--seconds", str(seconds), "--start-at", f"{start_at:.3f}", "--stamps",
                stamps]

    @staticmethod
    def ready_s(kinds):
        return 16.0 if any(k in TORCH_KINDS for k in kinds) else 3.0


def read_stamps(path):
    """[(end_ns, latency_ns or None)] in order of completion."""
    out = []
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if parts:
                    out.append((int(parts[0]), int(parts[1]) if len(parts) > 1 else None))
    except OSError:
        pass
    out.sort()
    return out


def gpu_time_per_window(stamps, unit_ns, t0, n_windows, at_end=False):
    """GPU time (ns) per window [t0 + k*W, t0 + (k+1)*W): each unit's cost spread
    over the interval since the previous unit ended, or (at_end: a kernel, shorter
    than any timeslice, runs in one piece) over the unit_ns before it ended."""
    got = [0.0] * n_windows
    prev = None
    for end, _ in stamps:
        start = prev if prev is not None else end - unit_ns
        if at_end:
            start = max(start, end - unit_ns)
        prev = end
        span = max(end - start, 1)
        k0, k1 = max(0, (start - t0) // WINDOW_NS), min(n_windows - 1, (end - t0) // WINDOW_NS)
        for k in range(int(k0), int(k1) + 1):
            lo, hi = max(start, t0 + k * WINDOW_NS), min(end, t0 + (k + 1) * WINDOW_NS)
            if hi > lo:
                got[k] += unit_ns * (hi - lo) / span
    return got


def percentile(values, q):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]


def rate_span(ends, seconds):
    """(kernels, seconds) between the first and the last kernel end: a rate with no
    part-kernel at either end (long kernels: a few per run)."""
    if len(ends) < 2:
        return len(ends), seconds
    return len(ends) - 1, (ends[-1] - ends[0]) / 1e9


class Clocks:
    """The GPU's SM clock sampled every 50 ms by nvidia-smi while a run goes on."""

    def __init__(self, path):
        self.path = path
        self.f = open(path, "w")
        try:
            self.p = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm",
                                       "--format=csv,noheader,nounits", "-lms", "50"],
                                      stdout=self.f, stderr=subprocess.DEVNULL)
        except OSError:
            self.p = None

    def stop(self, t_from, t_to):
        """Mean and lowest SM clock (MHz) of the samples in [t_from + 1.5 s, t_to)."""
        if self.p:
            self.p.terminate()
            self.p.wait()
        self.f.close()
        mhz = []
        with open(self.path) as f:
            for line in f:
                parts = [x.strip() for x in line.split(",")]
                try:
                    t = time.mktime(time.strptime(parts[0].split(".")[0], "%Y/%m/%d %H:%M:%S"))
                    if t_from + SKIP_NS / 1e9 <= t < t_to:
                        mhz.append(float(parts[1]))
                except (ValueError, IndexError):
                    continue
        return {"mean_mhz": sum(mhz) / len(mhz) if mhz else float("nan"),
                "min_mhz": min(mhz) if mhz else float("nan"), "samples": len(mhz)}


class Bench:
    def __init__(self, args):
        self.args = args
        self.kinds = Kinds(args.bin, args.python)
        self.kairos = os.path.join(args.bin, "kairos")
        self.kairosd = os.path.join(args.bin, "kairosd")
        self.work = os.path.join(args.out, "compute")
        os.makedirs(self.work, exist_ok=True)
        self.solo = {}      # kind -> {"unit_ns", "units_per_s", "p99_ms"}
        self.results = {"seconds": args.seconds, "mixes": {}}

    # ---- running tenants -------------------------------------------------------------

    def run_tenants(self, name, tenants, kairos_cfg=None, time_mode=None, env_extra=None,
                    seconds=None):
        """tenants: [(tenant_name, kind)]. Runs them together, natively or (with
        kairos_cfg, the tenants' policies) each under `kairos run`; returns
        [(tenant_name, kind, stamps, stdout+stderr)]. A tenant that does not end by
        itself (a lost doorbell ring hangs it) or fails is listed in "failures".
        seconds: this run's length (default --seconds)."""
        s = seconds or self.args.seconds
        daemon = (self.start_daemon(name, kairos_cfg, time_mode) if kairos_cfg is not None
                  else None)
        start_at = time.time() + Kinds.ready_s([k for _, k in tenants])
        procs = []
        for tname, kind in tenants:
            stamps = os.path.join(self.work, f"{name}-{tname}.stamps")
            cmd = self.kinds.command(kind, s, start_at, stamps)
            env = dict(os.environ, **(env_extra or {}))
            if daemon:
                cmd = [self.kairos, "run", "--tenant", tname, "--"] + cmd
                env["KAIROS_SHIM_CONF"] = daemon[3]
                env["KAIROS_LOG"] = "stderr"
            log = open(os.path.join(self.work, f"{name}-{tname}.log"), "w+")
            procs.append((tname, kind, stamps, log,
                          subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)))
        out = []
        deadline = start_at + s + 30
        for tname, kind, stamps, log, p in procs:
            hung = False
            try:
                p.wait(timeout=max(1.0, deadline - time.time()))
            except subprocess.TimeoutExpired:
                hung = True
                p.kill()
                p.wait()
            log.seek(0)
            text = log.read()
            log.close()
            if p.returncode or hung:
                why = "hung (killed)" if hung else f"exited {p.returncode}"
                self.results.setdefault("failures", []).append(f"{name}/{tname}: {why}")
                print(f"  {name}/{tname} ({kind}) {why}: {text.strip()[-300:]}")
            out.append((tname, kind, read_stamps(stamps), text))
        if daemon:
            self.stop_daemon(daemon)
        return start_at, out

    @staticmethod
    def shim_conf(sock):
        """A shim.conf naming sock beside it: how a shim finds a private daemon
        (libkairos(7)); the shim reads no KAIROS_SOCKET. Written once per daemon and
        put in place by rename: the tenants of a mix start while the next ones are
        being launched, and one that read a half-written file found no daemon (the
        8-tenant mixes of 2026-12-03)."""
        path = os.path.join(os.path.dirname(sock), "shim.conf")
        with open(path + ".new", "w") as f:
            f.write(f"socket: {sock}\non_daemon_down: closed\n")
        os.chmod(path + ".new", 0o644)
        os.rename(path + ".new", path)
        return path

    def start_daemon(self, name, policies, time_mode=None):
        d = os.path.join(self.work, f"kd-{name}")
        os.makedirs(d, exist_ok=True)
        sock = os.path.join(d, "kairosd.sock")
        quota = max(4, 120 // max(1, len(policies)))
        lines = [f"socket: {sock}", f"state: {d}/state.json", "admins: [0]",
                 "audit: { interval_ms: 0 }"] + ([f"time_mode: {time_mode}"] if time_mode else [])
        lines.append("tenants:")
        for tname, pol in policies.items():
            comp = ", ".join(f"{k}: {v}" for k, v in pol.items())
            lines.append(f"  - name: {tname}")
            lines.append(f"    memory: {{ 0: {quota}G }}")
            if comp:
                lines.append(f"    compute: {{ 0: {{ {comp} }} }}")
        cfg = os.path.join(d, "kairosd.yaml")
        with open(cfg, "w") as f:
            f.write("\n".join(lines) + "\n")
        log = open(os.path.join(self.work, f"kairosd-{name}.log"), "w")
        p = subprocess.Popen([self.kairosd, "-c", cfg, "-l", "debug"], stdout=log,
                             stderr=subprocess.STDOUT)
        for _ in range(100):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        return (p, sock, log, self.shim_conf(sock))

    @staticmethod
    def stop_daemon(daemon):
        p, _, log, _ = daemon
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
        log.close()

    # ---- measuring -------------------------------------------------------------------

    def solo_runs(self, kinds):
        for kind in kinds:
            secs = long_seconds(self.args.seconds) if kind == "long" else self.args.seconds
            clocks = Clocks(os.path.join(self.work, f"clocks-solo-{kind}.csv")) \
                if kind == "long" else None
            start_at, out = self.run_tenants(f"solo-{kind}", [("t0", kind)], seconds=secs)
            _, _, stamps, text = out[0]
            window = [e for e, _ in stamps if e >= start_at * 1e9]
            n = len(window)
            lat = [lat / 1e6 for _, lat in stamps if lat is not None]
            span = secs
            if kind == "long":  # the rate between kernel ends: no tail after the run
                n, span = rate_span(window, secs)
            self.solo[kind] = {
                "units": n,
                "units_per_s": n / span if span else float("nan"),
                "unit_ns": span * 1e9 / n if n else float("nan"),
                "p50_ms": percentile(lat, 0.5) if lat else None,
                "p99_ms": percentile(lat, 0.99) if lat else None,
            }
            if clocks:
                self.solo[kind]["sm_clock"] = clocks.stop(start_at, start_at + secs)
            print(f"  solo {kind:8s} {self.solo[kind]['units_per_s']:10.1f} units/s"
                  + (f"  p99 {percentile(lat, 0.99):.2f} ms" if lat else "")
                  + (f"  SM clock mean {self.solo[kind]['sm_clock']['mean_mhz']:.0f} MHz"
                     if clocks else ""))

    def shares(self, start_at, out, targets, seconds=None):
        """Per-window and run share error against targets {tenant: share}."""
        t0 = int(start_at * 1e9) + SKIP_NS
        t_end = int(start_at * 1e9) + int((seconds or self.args.seconds) * 1e9) - TAIL_NS
        n = max(1, (t_end - t0) // WINDOW_NS)
        per = {}
        for tname, kind, stamps, _ in out:
            if kind == "idle":
                continue
            per[tname] = gpu_time_per_window(stamps, self.solo[base_kind(kind)]["unit_ns"], t0, n,
                                             kind in KERNEL_KINDS)
        total_w = [sum(per[t][k] for t in per) for k in range(n)]
        run = {t: sum(per[t]) for t in per}
        run_total = sum(run.values())
        tsum = sum(targets.values()) or 1
        errs, run_err = [], {}
        for t in per:
            tgt = targets.get(t, 0) / tsum
            errs += [abs(per[t][k] / total_w[k] - tgt) * 100 for k in range(n) if total_w[k] > 0]
            run_err[t] = abs(run[t] / run_total - tgt) * 100 if run_total else float("nan")
        frac = {t: run[t] / (n * WINDOW_NS) for t in per}  # fraction of the GPU (of solo)
        return {
            "per_window": {t: [g / WINDOW_NS for g in per[t]] for t in per},
            "window_err_p50": percentile(errs, 0.5), "window_err_p95": percentile(errs, 0.95),
            "run_err_max": max(run_err.values()) if run_err else float("nan"),
            "run_share": {t: run[t] / run_total if run_total else 0 for t in per},
            "of_solo": frac, "aggregate": sum(frac.values()), "windows": int(n),
        }

    def mix(self, name, tenants, policies, targets):
        """tenants [(name, kind)], policies {name: {share: '75%', ...}}, targets {name: x}."""
        res = {}
        # both kairosd modes on the kernel streams; the PyTorch mixes (slower to
        # start) natively and in windows only, to fit one GPU session
        modes = MODES if all(k in KERNEL_KINDS for _, k in tenants) else ("native",
                                                                          "kairos-windows")
        for mode in modes:
            if self.args.modes and mode not in self.args.modes.split(","):
                continue
            start_at, out = self.run_tenants(f"{name}-{mode}", tenants,
                                             policies if mode != "native" else None,
                                             MODES[mode])
            r = self.shares(start_at, out, targets)
            r["shim"] = [line for _, _, _, text in out for line in text.splitlines()
                         if "time control:" in line]
            r["late_starts"] = [line for _, _, _, text in out for line in text.splitlines()
                                if "ready_margin_s=-" in line]
            res[mode] = r
            if mode != "native":
                self.show_feedback(f"{name}-{mode}")
            print(f"  {name:22s} {mode:17s} err p50 {r['window_err_p50']:5.2f} p95 "
                  f"{r['window_err_p95']:5.2f} run {r['run_err_max']:5.2f} pp  aggregate "
                  f"{r['aggregate']:.3f}  shares " + " ".join(
                      f"{t}={v * 100:.1f}" for t, v in r["run_share"].items()))
        self.results["mixes"][name] = {"tenants": tenants, "policies": policies,
                                       "targets": targets, **res}

    def limit_mix(self):
        """A 30 % limit next to an idle neighbour (a tenant with a share that runs
        nothing): the capped tenant's fraction of the GPU per window."""
        name = "limit-30-idle-neighbour"
        pol = {"capped": {"limit": "30%"}, "idle": {"share": "50%"}}
        start_at, out = self.run_tenants(name, [("capped", "deep")], pol)
        t0 = int(start_at * 1e9) + SKIP_NS
        n = int((self.args.seconds * 1e9 - SKIP_NS - TAIL_NS) // WINDOW_NS)
        _, kind, stamps, text = out[0]
        got = gpu_time_per_window(stamps, self.solo[kind]["unit_ns"], t0, n, True)
        frac = [g / WINDOW_NS * 100 for g in got]
        errs = [abs(f - 30) for f in frac]
        r = {"mean_pct": sum(frac) / len(frac), "max_pct": max(frac),
             "window_err_p50": percentile(errs, 0.5), "window_err_p95": percentile(errs, 0.95),
             "shim": [line for line in text.splitlines() if "time control:" in line]}
        r.update(self.bursts(stamps, t0))
        self.results["mixes"][name] = r
        print(f"  {name:22s} kairos mean {r['mean_pct']:.2f} % of solo, largest window "
              f"{r['max_pct']:.2f} %, err p50 {r['window_err_p50']:.2f} p95 "
              f"{r['window_err_p95']:.2f} pp; ran {r['burst_ms']:.2f} ms per 30 ms window")
        for line in r["shim"]:
            print("   ", line.strip())

    # ---- issue 11: lending, long kernels ----------------------------------------------

    def lend_idle(self):
        """a (75 %) is a PyTorch process that made its context and sleeps; b (25 %)
        a deep kernel stream. Goal: b >= 0.95 of solo (a lends its whole window)."""
        name = "lend-idle-torch"
        pol = {"a": {"share": "75%"}, "b": {"share": "25%"}}
        res = {}
        for mode in ("kairos-windows", "kairos-auto"):
            start_at, out = self.run_tenants(f"{name}-{mode}", [("a", "idle"), ("b", "deep")],
                                             pol, MODES[mode])
            r = self.shares(start_at, out, {"b": 1.0})
            b = r["per_window"].get("b", [])
            res[mode] = {"b_of_solo": r["of_solo"].get("b", float("nan")),
                         "b_window_p05": percentile(b, 0.05), "windows": r["windows"]}
            self.show_feedback(f"{name}-{mode}")
            print(f"  {name:22s} {mode:17s} b at {res[mode]['b_of_solo']:.3f} of solo, "
                  f"worst 5 % of windows {res[mode]['b_window_p05']:.3f} (goal >= 0.95)")
        self.results["mixes"][name] = res

    def lend_then_busy(self):
        """a (75 %) lives but idles for the first half, then runs a deep stream; b
        (25 %) runs a deep stream throughout. Goals: b >= 0.95 of solo while a idles;
        a back to its share (a window at >= 90 % of its 75 %) within 1 period of its
        first kernel."""
        name = "lend-then-busy"
        pol = {"a": {"share": "75%"}, "b": {"share": "25%"}}
        s = self.args.seconds
        res = {}
        for mode in ("kairos-windows", "kairos-auto"):
            start_at, out = self.run_tenants(f"{name}-{mode}", [("a", "deep-late"),
                                                                ("b", "deep")], pol, MODES[mode])
            r = self.shares(start_at, out, {"a": 0.75, "b": 0.25})
            pw = r["per_window"]
            half = int((s / 2 * 1e9 - SKIP_NS) // WINDOW_NS)  # first window of a's work
            a, b = pw.get("a", []), pw.get("b", [])
            idle_b = b[:max(0, half)]
            back = next((k - half for k in range(half, len(a)) if a[k] >= 0.9 * 0.75), None)
            busy = slice(half + 2, len(a))
            res[mode] = {
                "b_while_a_idle": sum(idle_b) / len(idle_b) if idle_b else float("nan"),
                "a_back_after_windows": back,
                "a_busy": sum(a[busy]) / max(1, len(a[busy])),
                "b_busy": sum(b[busy]) / max(1, len(b[busy])),
                "a_windows": [round(x, 3) for x in a[max(0, half - 2):half + 6]],
            }
            x = res[mode]
            print(f"  {name:22s} {mode:17s} b {x['b_while_a_idle']:.3f} of solo while a idled; "
                  f"a back to >= 0.9 of its share after {x['a_back_after_windows']} window(s) "
                  f"(a {x['a_busy']:.3f}, b {x['b_busy']:.3f} after); a's windows around its "
                  f"start {x['a_windows']}")
        self.results["mixes"][name] = res

    def long_limit(self):
        """170 ms kernels bounded by work (8 at a time, then a sync) under a 30 %
        limit: work done as a fraction of solo, counted between kernel ends over a
        run of long_seconds (4 s runs held ~4 kernels). Alone, with the SM clock
        sampled (nvidia-smi) beside solo's: a GPU idle 70 % of the time may clock
        down, so the same time on the GPU does less work; and next to a deep tenant
        (share 70 %), where the GPU never idles. kairosd's last window is printed:
        whether the scheduler shortened it (an overrun charge) shows there."""
        secs = long_seconds(self.args.seconds)
        solo_rate = self.solo["long"]["units_per_s"]
        res = {}
        for name, tenants, pol in (
                ("long-kernels-30", [("capped", "long")], {"capped": {"limit": "30%"}}),
                ("long-30-next-to-deep", [("capped", "long"), ("other", "deep")],
                 {"capped": {"share": "30%", "limit": "30%"}, "other": {"share": "70%"}})):
            clocks = Clocks(os.path.join(self.work, f"clocks-{name}.csv"))
            start_at, out = self.run_tenants(name, tenants, pol, "windows", seconds=secs)
            clk = clocks.stop(start_at, start_at + secs)
            stamps = [e for e, _ in out[0][2] if e >= start_at * 1e9]
            n, span = rate_span(stamps, secs)
            r = {"of_solo": (n / span / solo_rate) if span and solo_rate else float("nan"),
                 "kernels": n, "sm_clock": clk,
                 "shim": [line for _, _, _, text in out for line in text.splitlines()
                          if "time control:" in line]}
            if len(tenants) > 1:
                r["other_of_solo"] = self.shares(start_at, out, {"capped": 0.3, "other": 0.7},
                                                 secs)["of_solo"].get("other", float("nan"))
            res[name] = r
            self.show_feedback(name)
            print(f"  {name:22s} kairos-windows   work done {r['of_solo']:.3f} of solo (limit "
                  f"0.30, {n} kernels), SM clock mean {clk['mean_mhz']:.0f} MHz (solo "
                  f"{self.solo['long'].get('sm_clock', {}).get('mean_mhz', float('nan')):.0f})"
                  + (f"; neighbour at {r['other_of_solo']:.3f} of solo"
                     if "other_of_solo" in r else ""))
            for line in r["shim"]:
                print("   ", line.strip())
        self.results["mixes"]["long-kernels-30"] = res["long-kernels-30"]
        self.results["mixes"]["long-30-next-to-deep"] = res["long-30-next-to-deep"]

    def bursty(self):
        """Bursty inference at share 50 % next to training: infer is a deep kernel
        stream in spells of BURST_MS, idle (alive) for IDLE_MS; train a deep stream
        throughout (share 50 %). Judged per 100 ms window: in the windows inside a
        spell (but the first, when the share comes back), infer's part of the busy
        time against 50 % (goal p95 <= 1 pp), and apart in the first (starting in
        the spell's first 100 ms: the share back at once, issue 11's comeback); in
        those inside an idle spell (but the first), train's fraction of solo (the
        idle share lent, goal >= 0.95)."""
        name = "bursty-50-train"
        secs = max(self.args.seconds, 6.0)
        tenants = [("infer", "bursty"), ("train", "deep")]
        pol = {"infer": {"share": "50%"}, "train": {"share": "50%"}}
        cycle_ns = (BURST_MS + IDLE_MS) * 1_000_000
        res = {}
        for mode in MODES:
            if self.args.modes and mode not in self.args.modes.split(","):
                continue
            start_at, out = self.run_tenants(f"{name}-{mode}", tenants,
                                             pol if mode != "native" else None, MODES[mode],
                                             seconds=secs)
            if "burst_ms=" not in out[0][3]:
                print(f"  {name}: kernel_stream has no --burst-ms (rebuild it: scripts/gpu-carry)")
                return
            r = self.shares(start_at, out, {"infer": 0.5, "train": 0.5}, secs)
            pw = r["per_window"]
            t0 = int(start_at * 1e9) + SKIP_NS
            errs, first, lent = [], [], []
            for k in range(r["windows"]):
                lo = t0 + k * WINDOW_NS - int(start_at * 1e9)
                # the spell each end of the window falls in, and where in the cycle
                c_lo, c_hi = lo // cycle_ns, (lo + WINDOW_NS - 1) // cycle_ns
                in_lo, in_hi = lo % cycle_ns, (lo + WINDOW_NS - 1) % cycle_ns
                busy_ns = BURST_MS * 1_000_000
                if c_lo == c_hi and in_hi < busy_ns:
                    tot = pw["infer"][k] + pw["train"][k]
                    if tot > 0:
                        (errs if in_lo >= WINDOW_NS else first).append(
                            abs(pw["infer"][k] / tot - 0.5) * 100)
                elif c_lo == c_hi and in_lo >= busy_ns + WINDOW_NS:
                    lent.append(pw["train"][k])
            res[mode] = {"busy_err_p50": percentile(errs, 0.5),
                         "busy_err_p95": percentile(errs, 0.95), "busy_windows": len(errs),
                         "first_err_p50": percentile(first, 0.5),
                         "first_err_p95": percentile(first, 0.95), "first_windows": len(first),
                         "train_while_idle": sum(lent) / len(lent) if lent else float("nan"),
                         "idle_windows": len(lent), "aggregate": r["aggregate"],
                         "run_share": r["run_share"]}
            x = res[mode]
            if mode != "native":
                self.show_feedback(f"{name}-{mode}")
            print(f"  {name:22s} {mode:17s} infer's part of busy time in its spells: err p50 "
                  f"{x['busy_err_p50']:5.2f} p95 {x['busy_err_p95']:5.2f} pp ({len(errs)} "
                  f"windows), first window p95 {x['first_err_p95']:5.2f} pp ({len(first)}); "
                  f"train {x['train_while_idle']:.3f} of solo while infer idles "
                  f"({len(lent)} windows); aggregate {x['aggregate']:.3f}")
        self.results["mixes"][name] = res

    def show_feedback(self, run):
        """The last utilization line and decision kairosd logged in a run."""
        try:
            with open(os.path.join(self.work, f"kairosd-{run}.log")) as f:
                lines = f.readlines()
        except OSError:
            return
        for key in ("utilization", "window"):
            last = [ln for ln in lines if key in ln]
            if last:
                print("    kairosd:", last[-1].split(": ", 1)[-1].strip())

    @staticmethod
    def bursts(stamps, t0):
        """The runs of kernels between pauses: how long the tenant ran per window."""
        ends = [e for e, _ in stamps if e >= t0]
        runs, first = [], None
        for a, b in zip(ends, ends[1:]):
            first = a if first is None else first
            if b - a > 5_000_000:  # a gap of 5 ms: it was paused
                runs.append(a - first)
                first = None
        return {"burst_ms": (sum(runs) / len(runs) / 1e6) if runs else float("nan"),
                "bursts": len(runs)}

    def lone_overhead(self, kind):
        """The same tenant alone, natively and under kairosd with a share."""
        rates = {}
        for mode in ("native", "kairos"):
            pol = {"lone": {"share": "50%"}} if mode == "kairos" else None
            start_at, out = self.run_tenants(f"lone-{kind}-{mode}", [("lone", kind)], pol)
            stamps = out[0][2]
            rates[mode] = len([e for e, _ in stamps if e >= start_at * 1e9]) / self.args.seconds
        ratio = rates["kairos"] / rates["native"] if rates["native"] else float("nan")
        self.results.setdefault("lone", {})[kind] = {**rates, "ratio": ratio}
        print(f"  lone {kind:8s} native {rates['native']:.1f}/s kairos {rates['kairos']:.1f}/s "
              f"ratio {ratio:.4f} (overhead {(1 - ratio) * 100:.2f} %)")


def pct(x):
    return f"{int(round(x * 100))}%"


# native: the driver's own time-slicing; then kairosd in each of its time modes
MODES = {"native": None, "kairos-timeslices": "timeslices", "kairos-windows": "windows",
         "kairos-auto": "auto"}

MIXES = {
    "75-25-deep": ([("a", "deep"), ("b", "deep")], {"a": 0.75, "b": 0.25}),
    "70-30-deep-shallow": ([("a", "deep"), ("b", "shallow")], {"a": 0.70, "b": 0.30}),
    "40-30-20-10": ([("a", "deep"), ("b", "shallow"), ("c", "deep"), ("d", "shallow")],
                    {"a": 0.40, "b": 0.30, "c": 0.20, "d": 0.10}),
    "8-equal": ([(f"t{i}", "deep" if i % 2 == 0 else "shallow") for i in range(8)],
                {f"t{i}": 0.125 for i in range(8)}),
    # deep queues only: what auto's timeslices that fill the period keep of solo with 4
    # and 8 tenants (no pause), against windows' one pause per tenant per period
    "40-30-20-10-deep": ([(x, "deep") for x in "abcd"],
                         {"a": 0.40, "b": 0.30, "c": 0.20, "d": 0.10}),
    "8-equal-deep": ([(f"t{i}", "deep") for i in range(8)], {f"t{i}": 0.125 for i in range(8)}),
    # PyTorch tenants: their units leave the GPU idle between them (Python, syncs),
    # so solo cost overstates their GPU time; read these as throughput, not shares
    "70-30-matmul-train": ([("a", "matmul"), ("b", "train")], {"a": 0.70, "b": 0.30}),
    "40-30-20-10-torch": ([("a", "deep"), ("b", "matmul"), ("c", "train"), ("d", "shallow")],
                          {"a": 0.40, "b": 0.30, "c": 0.20, "d": 0.10}),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=6)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--only", default="")
    ap.add_argument("--modes", default="", help="e.g. native,kairos-windows (default: all)")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    if only & {"latency", "latency-kairos"}:
        ap.error("--only latency, latency-kairos: inference latency next to training is "
                 "the latency section's now: scripts/gpu-suite latency (tests/gpu/latency.sh)")
    b = Bench(args)
    want = lambda n: not only or n in only  # noqa: E731
    kinds = {k for name, (tenants, _) in MIXES.items() if want(name) for _, k in tenants}
    kinds |= {"deep"} if want("limit") or want("lone") or want("lend") or want("bursty") else set()
    kinds |= {"long", "deep"} if want("long") else set()
    kinds |= {"train"} if want("lone") else set()
    print("--- compute: solo runs")
    b.solo_runs([k for k in ("deep", "shallow", "long", "matmul", "train") if k in kinds])
    print("--- compute: mixes (native, then under kairosd)")
    for name, (tenants, targets) in MIXES.items():
        if want(name):
            b.mix(name, tenants, {t: {"share": pct(s)} for t, s in targets.items()}, targets)
    if want("bursty"):
        b.bursty()
    if want("lend"):
        b.lend_idle()
        b.lend_then_busy()
    if want("long"):
        b.long_limit()
    if want("limit"):
        b.limit_mix()
    if want("lone"):
        for kind in ("deep", "train"):
            if kind in b.solo:
                b.lone_overhead(kind)
    b.results["solo"] = b.solo
    with open(os.path.join(args.out, "compute-results.json"), "w") as f:
        json.dump(b.results, f, indent=1)
    # the per-run logs and stamps, in one file (the GPU machine returns few files)
    subprocess.run(["tar", "czf", os.path.join(args.out, "compute-runs.tar.gz"), "-C", args.out,
                    "compute"], check=False)
    subprocess.run(["rm", "-rf", b.work], check=False)
    table(b.results)


def table(r):
    print("\n=== compute isolation (goals: window err p95 <= 1 pp, run err <= 0.5 pp, "
          "aggregate >= 0.99 of solo, lone overhead <= 1 %)")
    print(f"{'mix':22s} {'mode':17s} {'p50':>6s} {'p95':>6s} {'run':>6s} {'aggr':>6s}")
    for name, m in r["mixes"].items():
        for mode in MODES:
            if mode in m and "window_err_p50" in m[mode]:
                x = m[mode]
                print(f"{name:22s} {mode:17s} {x['window_err_p50']:6.2f} {x['window_err_p95']:6.2f} "
                      f"{x['run_err_max']:6.2f} {x['aggregate']:6.3f}")
        if "mean_pct" in m:
            print(f"{name:22s} kairos  mean {m['mean_pct']:.2f} % max {m['max_pct']:.2f} % "
                  f"p95 err {m['window_err_p95']:.2f} pp")
    for kind, x in r.get("lone", {}).items():
        print(f"lone {kind:17s} kairos/native {x['ratio']:.4f}")
    for name in ("lend-idle-torch", "lend-then-busy"):
        for mode, x in r["mixes"].get(name, {}).items():
            if "b_of_solo" in x:
                print(f"{name:22s} {mode:17s} busy neighbour at {x['b_of_solo']:.3f} of solo "
                      f"(p05 window {x['b_window_p05']:.3f}; goal >= 0.95)")
            else:
                print(f"{name:22s} {mode:17s} neighbour {x['b_while_a_idle']:.3f} while idle; "
                      f"share back after {x['a_back_after_windows']} window(s)")
    for mode, x in r["mixes"].get("bursty-50-train", {}).items():
        print(f"{'bursty-50-train':22s} {mode:17s} busy-time err p50 {x['busy_err_p50']:.2f} "
              f"p95 {x['busy_err_p95']:.2f} pp (goal p95 <= 1), first window p95 "
              f"{x.get('first_err_p95', float('nan')):.2f} pp; train {x['train_while_idle']:.3f} "
              f"of solo while infer idles; aggr {x['aggregate']:.3f}")
    solo_clk = r.get("solo", {}).get("long", {}).get("sm_clock", {}).get("mean_mhz", float("nan"))
    for name in ("long-kernels-30", "long-30-next-to-deep"):
        if name in r["mixes"]:
            x = r["mixes"][name]
            clk = x.get("sm_clock", {}).get("mean_mhz", float("nan"))
            print(f"{name:22s} limit 30 %: work {x['of_solo']:.3f} of solo, SM clock {clk:.0f} "
                  f"MHz (solo {solo_clk:.0f})" + (f", neighbour {x['other_of_solo']:.3f} of solo"
                                                  if "other_of_solo" in x else ""))
    fails = r.get("failures", [])
    print(f"tenants that hung or failed (a lost doorbell ring hangs one): "
          f"{len(fails)} {' '.join(fails)}")


if __name__ == "__main__":
    main()
