#!/usr/bin/env python3
"""The latency benchmark (issue 11, section 4), run by scripts/gpu-suite latency.

An inference tenant (ResNet-50, batch 8, one CUDA graph per request) serves requests
with seeded exponential idle gaps next to a training tenant (ResNet-50 SGD, batch 256,
one step always queued) that keeps the GPU busy; tests/gpu/latency_tenant.py is each.
First, in the same invocation, solo: the inference tenant alone (the training process
alive, waiting), then the training tenant alone. Then each configuration, with the
same request schedule: native time-slicing, MPS (a private nvidia-cuda-mps-control,
its own pipe and log folders, stopped after; skipped where the machine has none),
and kairosd in windows, timeslices and auto modes with the inference tenant at
priority latency (share 50 %) and the training tenant at priority batch (share 50 %).
Per configuration: request p50 and p99, the p99 as a ratio to solo's with its 95 %
bootstrap interval (both samples resampled), and the training tenant's steps/s while
the requests ran as a ratio to its solo rate. Goal: p99 <= 1.1x solo. Named only:
solo-again, the inference tenant alone once more after the others (how far solo moved).

Named only as well: kairos-MODE-yUS, kairosd in MODE with latency_yield_us: US, the
training tenant's timeslice beside the latency tenant (0: the rule off).

Every tenant must end by itself; one that fails, hangs, or under Kairos runs without
the shim (under MPS without the MPS pipe) is listed in "failures" and its
configuration left out of the table (exit status 1).
Writes OUT/latency-results.json and OUT/latency-runs.tar.gz (logs and stamps) and
prints a table last. --dry-run: tenants with no torch and no GPU (sleeps), the
same driver, kairosd and `kairos run` included: tests/system/test_latency_bench.py.
Usage: latency_bench.py --bin DIR --out DIR [--configs native,mps,kairos-windows,...]
                        [--requests N] [--gap-ms MS] [--batch B] [--dry-run]
"""
import argparse
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import latency_stats as stats  # noqa: E402

LATENCY_POLICY = {"infer": {"share": "50%", "priority": "latency"},
                  "train": {"share": "50%", "priority": "batch"}}
# label -> (kairosd policies or None, time_mode, under MPS)
CONFIGS = {
    "native": (None, None, False),
    "mps": (None, None, True),
    "kairos-windows": (LATENCY_POLICY, "windows", False),
    "kairos-timeslices": (LATENCY_POLICY, "timeslices", False),
    "kairos-auto": (LATENCY_POLICY, "auto", False),
}
# not run unless named: the inference tenant alone again, after the others (how far
# solo itself moved during the run; about 30 s more)
EXTRA_CONFIGS = {"solo-again": (None, None, False)}
# also named only: kairos-MODE-yUS, kairosd in MODE with latency_yield_us: US (the
# training tenant's slice beside the latency tenant; docs/scheduler.md)
YIELD_CONFIG = re.compile(r"kairos-(windows|timeslices|auto)-y(\d+)$")
GOAL = 1.1


def config_of(label):
    """(kairosd policies or None, time_mode, under MPS, more kairosd.yaml lines) of a
    configuration's label, or None for an unknown label."""
    if label in CONFIGS or label in EXTRA_CONFIGS:
        return {**CONFIGS, **EXTRA_CONFIGS}[label] + ([],)
    m = YIELD_CONFIG.match(label)
    if m:
        return LATENCY_POLICY, m.group(1), False, [f"latency_yield_us: {m.group(2)}"]
    return None


class Run:
    """One configuration's two tenant processes, started together and handed the same
    start time once both are ready (files in a folder of the run's own)."""

    def __init__(self, bench, label, daemon=None, env_extra=None):
        self.b, self.label, self.daemon = bench, label, daemon
        self.dir = os.path.join(bench.work, label)
        os.makedirs(self.dir, exist_ok=True)
        self.env_extra = env_extra or {}
        self.procs = {}
        self.failures = []

    def tenant_cmd(self, role, extra):
        a = self.b.args
        cmd = [a.python, os.path.join(HERE, "latency_tenant.py"), "--role", role,
               "--dir", self.dir, "--name", role, "--seed", str(a.seed)]
        if role == "infer":
            cmd += ["--batch", str(a.batch), "--requests", str(a.requests),
                    "--gap-ms", str(a.gap_ms), "--max-s", str(a.max_s)]
        else:
            cmd += ["--batch", str(a.train_batch), "--max-s", str(a.max_s + 120)]
        if a.dry_run:
            cmd += ["--dry-run"]
        if self.daemon:
            cmd = [self.b.kairos, "run", "--tenant", role, "--"] + cmd
        return cmd + extra

    def start(self, role, extra):
        env = dict(os.environ, **self.env_extra)
        if self.daemon:  # the shim says at exit how often it paused (in the log)
            env["KAIROS_SHIM_CONF"] = self.daemon.shim_conf
            env["KAIROS_LOG"] = "stderr"
        log = open(os.path.join(self.dir, f"{role}.log"), "w+")
        p = subprocess.Popen(self.tenant_cmd(role, extra), env=env, stdout=log,
                             stderr=subprocess.STDOUT, start_new_session=True)
        self.procs[role] = (p, log)

    def ready_info(self, role):
        """The key=value words the tenant wrote when it was ready, or None."""
        try:
            with open(os.path.join(self.dir, f"{role}.ready")) as f:
                return dict(w.split("=", 1) for w in f.read().split() if "=" in w)
        except OSError:
            return None

    def wait_ready(self, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if all(self.ready_info(r) is not None for r in self.procs):
                return True
            for role, (p, _) in self.procs.items():
                if p.poll() is not None:
                    self.fail(role, f"exited {p.returncode} before it was ready")
                    return False
            time.sleep(0.05)
        self.fail(",".join(self.procs), f"not ready after {timeout:.0f} s")
        return False

    def go(self, at):
        path = os.path.join(self.dir, "go")
        with open(path + ".new", "w") as f:
            f.write(f"{at:.6f}\n")
        os.rename(path + ".new", path)

    def stop_training(self):
        with open(os.path.join(self.dir, "stop"), "w") as f:
            f.write("stop\n")
        return time.time_ns()

    def wait(self, role, timeout):
        """Waits for a tenant to end by itself; kills its process group after timeout."""
        p, _ = self.procs[role]
        try:
            p.wait(timeout=max(1.0, timeout))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            self.fail(role, f"did not end within {timeout:.0f} s (killed)")
            return
        if p.returncode:
            self.fail(role, f"exited {p.returncode}")

    def kill_all(self):
        for role, (p, log) in self.procs.items():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            log.close()

    def fail(self, role, why):
        try:
            with open(os.path.join(self.dir, f"{role}.log")) as f:
                text = f.read().strip()[-400:]
        except OSError:
            text = ""
        self.failures.append(f"{self.label}/{role}: {why}")
        print(f"  {self.label}/{role} {why}: {text}", flush=True)

    def check_placement(self, under_kairos, under_mps):
        """Each tenant really ran where the configuration says: under the shim for
        Kairos (and not otherwise), with the MPS pipe for MPS."""
        for role in self.procs:
            info = self.ready_info(role) or {}
            if info.get("shim") != ("1" if under_kairos else "0"):
                self.fail(role, f"shim={info.get('shim')} but the configuration is "
                                f"{'under' if under_kairos else 'not under'} Kairos")
            if info.get("mps") != ("1" if under_mps else "0"):
                self.fail(role, f"mps={info.get('mps')} in configuration {self.label}")

    def pauses(self, role):
        try:
            with open(os.path.join(self.dir, f"{role}.log")) as f:
                return stats.shim_pauses(f.read())
        except OSError:
            return None

    def stamps(self, role):
        return stats.read_stamps(os.path.join(self.dir, f"{role}.stamps"))


class Daemon:
    """A private kairosd for one configuration, and the shim.conf that names it
    (tests/gpu/harm_bench.py's too). time_mode None: no time_mode line, kairosd's
    default; quota: each tenant's memory on GPU 0; a tenant with no policy gets only it;
    domain: every tenant's fault_domain (space mode; None: no such line); tenants_text:
    the tenants: list as written elsewhere (kairos plan --emit), instead of policies."""

    def __init__(self, work, label, policies, time_mode, more_lines, quota="60G",
                 domain=None, tenants_text=None):
        d = os.path.join(work, f"kd-{label}")
        os.makedirs(d, exist_ok=True)
        self.sock = os.path.join(d, "kairosd.sock")
        lines = [f"socket: {self.sock}", f"state: {d}/state.json", "admins: [0]",
                 "audit: { interval_ms: 0 }"] + more_lines
        if time_mode:
            lines.append(f"time_mode: {time_mode}")
        lines.append("tenants:")
        if tenants_text is not None:
            lines.append(tenants_text.rstrip("\n"))
        for name, pol in (policies or {}).items():
            comp = ", ".join(f"{k}: {v}" for k, v in pol.items() if k != "sms")
            lines += [f"  - name: {name}", f"    memory: {{ 0: {quota} }}"]
            lines += [f"    fault_domain: {domain}"] if domain else []
            lines += [f"    sms: {pol['sms']}"] if "sms" in pol else []  # a tenant's, not a GPU's
            lines += [f"    compute: {{ 0: {{ {comp} }} }}"] if comp else []  # none: quota only
        self.config = os.path.join(d, "kairosd.yaml")
        with open(self.config, "w") as f:
            f.write("\n".join(lines) + "\n")
        self.shim_conf = os.path.join(d, "shim.conf")
        with open(self.shim_conf + ".new", "w") as f:
            f.write(f"socket: {self.sock}\non_daemon_down: closed\n")
        os.chmod(self.shim_conf + ".new", 0o644)
        os.rename(self.shim_conf + ".new", self.shim_conf)
        self.log_path = os.path.join(work, f"kairosd-{label}.log")
        self.log = open(self.log_path, "w")
        self.proc = None

    def start(self, kairosd, extra_args):
        try:
            self.proc = subprocess.Popen([kairosd, "-c", self.config, "-l", "debug"]
                                         + extra_args, stdout=self.log, stderr=subprocess.STDOUT)
        except OSError as e:
            self.log.write(f"could not start {kairosd}: {e}\n")
            return False
        for _ in range(200):
            if os.path.exists(self.sock) or self.proc.poll() is not None:
                break
            time.sleep(0.05)
        return self.proc.poll() is None and os.path.exists(self.sock)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class Mps:
    """A private MPS control daemon: its own pipe and log folders (only the clients given
    env reach it), stopped by stop() ("quit"), never left running (harm_bench.py's too)."""

    def __init__(self, control, work):
        self.control = control
        d = os.path.join(work, "mps")
        self.env = {"CUDA_MPS_PIPE_DIRECTORY": os.path.join(d, "pipe"),
                    "CUDA_MPS_LOG_DIRECTORY": os.path.join(d, "log")}
        for v in self.env.values():
            os.makedirs(v, exist_ok=True)
        self.full = dict(os.environ, **self.env)

    def start(self):
        try:
            subprocess.run([self.control, "-d"], env=self.full, check=True, timeout=30)
            return True
        except (OSError, subprocess.SubprocessError) as e:
            print(f"  mps: could not start {self.control} -d: {e}", flush=True)
            return False

    def ask(self, command):
        try:
            r = subprocess.run([self.control], input=command + "\n", text=True, env=self.full,
                               capture_output=True, timeout=30)
            return r.stdout.strip()
        except (OSError, subprocess.SubprocessError) as e:
            return f"error: {e}"

    def stop(self):
        """quit, then up to 10 s for the MPS processes of this pipe folder (the control
        daemon and its server) to exit. (The daemon of CUDA 13.0 leaves its pipe's
        socket behind when it quits: waiting for the pipe to go took the 10 s at every
        stop on an H100.)"""
        pipe = self.env["CUDA_MPS_PIPE_DIRECTORY"]
        before = mps_processes(pipe)
        self.ask("quit")
        for _ in range(100):  # an exiting process has no environment left to name its pipe
            if not mps_processes(pipe) and not any(map(running, before)):
                return True
            time.sleep(0.1)
        print("  mps: the control daemon or its server still runs 10 s after quit",
              flush=True)
        return False


def running(pid):
    """Whether process pid exists and has not finished exiting (neither zombie nor dead)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0] not in "ZX"
    except (OSError, IndexError):
        return False


def mps_processes(pipe_dir):
    """The live (not zombie) pids named nvidia-cuda-mps* whose environment names pipe_dir
    as their CUDA_MPS_PIPE_DIRECTORY."""
    want = f"CUDA_MPS_PIPE_DIRECTORY={pipe_dir}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                comm, state = f.read().split(" (", 1)[1].rsplit(") ", 1)
            if not comm.startswith("nvidia-cuda-mps") or state.startswith("Z"):
                continue
            with open(f"/proc/{name}/environ", "rb") as f:
                if want in f.read().split(b"\0"):
                    found.append(int(name))
        except (OSError, ValueError, IndexError):
            continue
    return found


class Bench:
    def __init__(self, args):
        self.args = args
        self.kairos = args.kairos or os.path.join(args.bin, "kairos")
        self.kairosd = args.kairosd or os.path.join(args.bin, "kairosd")
        self.work = os.path.join(args.out, "latency")
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work)
        self.solo = None
        self.results = {"goal_p99_vs_solo": GOAL, "requests": args.requests,
                        "gap_ms_mean": args.gap_ms, "seed": args.seed, "batch": args.batch,
                        "train_batch": args.train_batch, "dry_run": args.dry_run,
                        "configs": {}, "failures": []}

    def requests_of(self, run):
        """(latencies in ms, first start ns, last end ns) of the inference tenant."""
        st = [s for s in run.stamps("infer") if len(s) == 2]
        if not st:
            return [], 0, 0
        return ([lat / 1e6 for _, lat in st], st[0][0],
                max(start + lat for start, lat in st))

    def train_ends(self, run):
        return [s[0] for s in run.stamps("train") if len(s) == 1]

    def run_solo(self):
        """The inference tenant alone (training alive, waiting for infer.done), then the
        training tenant alone for --train-solo-s."""
        a = self.args
        t = time.time()
        run = Run(self, "solo")
        try:
            run.start("infer", ["--lead-s", "0.3"])
            run.start("train", ["--after", os.path.join(run.dir, "infer.done")])
            if not run.wait_ready(a.ready_timeout_s):
                return self.finish(run)
            run.check_placement(False, False)
            run.go(time.time() + 0.2)
            run.wait("infer", a.max_s + 60)
            time.sleep(a.train_solo_s)
            stopped = run.stop_training()
            run.wait("train", 60)
        finally:
            run.kill_all()
        lat, lo, hi = self.requests_of(run)
        rate = stats.rate_between(self.train_ends(run), hi + 500_000_000, stopped)
        info = run.ready_info("infer") or {}
        self.solo = {"latencies": lat, "requests": len(lat),
                     "p50_ms": stats.percentile(lat, 0.5), "p99_ms": stats.percentile(lat, 0.99),
                     "train_steps_per_s": rate, "model": info.get("model"),
                     "graphs": info.get("graphs"), "seconds": time.time() - t}
        self.results["model"], self.results["graphs"] = info.get("model"), info.get("graphs")
        if len(lat) < 2 or math.isnan(rate):
            run.failures.append(f"solo: {len(lat)} requests, training rate {rate}")
        return self.finish(run)

    def finish(self, run):
        self.results["failures"] += run.failures
        return not run.failures

    def run_config(self, label):
        a = self.args
        policies, time_mode, under_mps, more_lines = config_of(label)
        alone = label == "solo-again"
        t = time.time()
        mps = daemon = None
        if under_mps:
            control = shutil.which(a.mps_control)
            if not control:
                print(f"  {label}: skipped: no {a.mps_control} on this machine", flush=True)
                self.results["configs"][label] = {"skipped": f"no {a.mps_control}"}
                return
            mps = Mps(control, self.work)
            if not mps.start():
                self.results["configs"][label] = {"skipped": "MPS did not start"}
                return
        run = None
        try:
            if policies:
                daemon = Daemon(self.work, label, policies, time_mode,
                                more_lines + (["gpus: 1"] if a.dry_run else []))
                if not daemon.start(self.kairosd, a.kairosd_arg):
                    self.results["failures"].append(f"{label}: kairosd did not start "
                                                    f"(see {daemon.log_path})")
                    return
            run = Run(self, label, daemon, mps.env if mps else None)
            run.start("infer", ["--lead-s", str(a.lead_s)] + (["--dry-fail"] if a.dry_fail == label
                                                            else []))
            if not alone:
                run.start("train", [])
            if run.wait_ready(a.ready_timeout_s):
                run.check_placement(bool(policies), under_mps)
                graphs = (run.ready_info("infer") or {}).get("graphs")
                if graphs != self.solo["graphs"]:  # not the same requests as solo's
                    run.fail("infer", f"graphs={graphs} where solo had {self.solo['graphs']}"
                                      " (CUDA graph capture failed in one of them)")
                run.go(time.time() + 0.2)
                run.wait("infer", a.lead_s + a.max_s + 60)
                if mps:  # the server MPS started for the clients: they did use it
                    servers = mps.ask("get_server_list")
                    self.results.setdefault("mps_servers", servers)
                    if not servers or servers.startswith("error"):
                        run.failures.append(f"{label}: no MPS server ({servers!r})")
                run.stop_training()
                if not alone:
                    run.wait("train", 60)
        finally:
            if run:
                run.kill_all()
            if daemon:
                daemon.stop()
            if mps:
                mps.stop()
        if not self.finish(run):
            return
        lat, lo, hi = self.requests_of(run)
        if len(lat) < 2:
            self.results["failures"].append(f"{label}: {len(lat)} requests served")
            return
        rate = stats.rate_between(self.train_ends(run), lo, hi)
        self.results["configs"][label] = self.summary(lat, rate, time.time() - t)
        if policies:
            self.results["configs"][label]["pauses"] = {r: run.pauses(r) for r in run.procs}

    def summary(self, lat, rate, seconds):
        s = self.solo
        p99 = stats.percentile(lat, 0.99)
        ratio = p99 / s["p99_ms"] if s["p99_ms"] else float("nan")
        ci = stats.bootstrap_ratio_ci(s["latencies"], lat, 0.99, self.args.resamples,
                                      self.args.seed)
        return {"requests": len(lat), "p50_ms": stats.percentile(lat, 0.5), "p99_ms": p99,
                "p99_vs_solo": ratio, "p99_vs_solo_ci95": list(ci),
                "goal": stats.goal_verdict(ratio, ci, GOAL),
                "train_steps_per_s": rate,
                "train_vs_solo": rate / s["train_steps_per_s"],
                "seconds": seconds}


def fmt(x, spec):
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def table(r):
    """The table printed last (scripts/gpu-suite shows it at the end of its output)."""
    lines = [f"=== latency next to saturating training (goal: request p99 <= {GOAL}x solo; "
             f"95 % bootstrap interval of the ratio)",
             f"inference {r.get('model')} batch {r['batch']} (CUDA graph: "
             f"{'yes' if r.get('graphs') == '1' else 'no'}), {r['requests']} requests per "
             f"configuration, idle gaps exponential mean {r['gap_ms_mean']} ms (seed "
             f"{r['seed']}); training ResNet-50 batch {r['train_batch']}"
             + ("; DRY RUN (no GPU)" if r["dry_run"] else ""),
             f"{'config':18s} {'requests':>8s} {'p50 ms':>8s} {'p99 ms':>8s} {'p99/solo':>9s} "
             f"{'95 % interval':>15s} {'goal':>8s} {'train/solo':>10s} {'steps/s':>8s} "
             f"{'pauses infer/train':>18s}"]
    s = r.get("solo")
    if s:
        lines.append(f"{'solo':18s} {s['requests']:8d} {fmt(s['p50_ms'], '8.3f')} "
                     f"{fmt(s['p99_ms'], '8.3f')} {'1.00':>9s} {'':>15s} {'':>8s} "
                     f"{'1.000':>10s} {fmt(s['train_steps_per_s'], '8.2f')}")
    for label, x in r["configs"].items():
        if "skipped" in x:
            lines.append(f"{label:18s} skipped: {x['skipped']}")
            continue
        lo, hi = x["p99_vs_solo_ci95"]
        lines.append(f"{label:18s} {x['requests']:8d} {fmt(x['p50_ms'], '8.3f')} "
                     f"{fmt(x['p99_ms'], '8.3f')} {fmt(x['p99_vs_solo'], '9.2f')} "
                     f"{'[' + fmt(lo, '.2f') + ', ' + fmt(hi, '.2f') + ']':>15s} "
                     f"{x['goal']:>8s} {fmt(x['train_vs_solo'], '10.3f')} "
                     f"{fmt(x['train_steps_per_s'], '8.2f')}"
                     + (" {:>18s}".format(f"{x['pauses']['infer']}/{x['pauses']['train']}")
                        if "pauses" in x else ""))
    fails = r["failures"]
    lines.append(f"failures (left out above): {len(fails)}" + "".join(f"\n  {f}" for f in fails))
    return "\n".join(lines)


def env_default(name, default, kind=float):
    v = os.environ.get(name)
    return kind(v) if v not in (None, "") else default


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True, help="kairos and kairosd live here")
    ap.add_argument("--kairos", help="kairos elsewhere than in --bin")
    ap.add_argument("--kairosd", help="kairosd elsewhere than in --bin")
    ap.add_argument("--out", required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--configs", default=os.environ.get("LATENCY_CONFIGS", ",".join(CONFIGS)))
    ap.add_argument("--requests", type=int, default=env_default("LATENCY_REQUESTS", 2000, int))
    ap.add_argument("--gap-ms", type=float, default=env_default("LATENCY_GAP_MS", 6.0))
    ap.add_argument("--batch", type=int, default=env_default("LATENCY_BATCH", 8, int))
    ap.add_argument("--train-batch", type=int,
                    default=env_default("LATENCY_TRAIN_BATCH", 256, int))
    ap.add_argument("--seed", type=int, default=env_default("LATENCY_SEED", 1, int))
    ap.add_argument("--lead-s", type=float, default=2.0,
                    help="training alone before the first request (policies settle)")
    ap.add_argument("--max-s", type=float, default=env_default("LATENCY_MAX_S", 30.0),
                    help="the most a configuration's requests may take")
    ap.add_argument("--train-solo-s", type=float, default=5.0)
    ap.add_argument("--ready-timeout-s", type=float, default=90.0)
    ap.add_argument("--resamples", type=int, default=2000 if stats.numpy else 400)
    ap.add_argument("--mps-control", default="nvidia-cuda-mps-control")
    ap.add_argument("--kairosd-arg", action="append", default=[])
    ap.add_argument("--dry-run", action="store_true", help="no torch, no GPU (CPU test)")
    ap.add_argument("--dry-fail", default="", help="dry run: this configuration's "
                    "inference tenant fails half way")
    args = ap.parse_args(argv)
    unknown = [c for c in args.configs.split(",") if c and not config_of(c)]
    if unknown:
        ap.error(f"unknown configuration(s) {','.join(unknown)}; known: "
                 f"{','.join({**CONFIGS, **EXTRA_CONFIGS})} and kairos-MODE-yUS "
                 "(MODE windows, timeslices or auto; US the latency_yield_us)")
    return args


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    b = Bench(args)
    t0 = time.time()
    print(f"--- latency: solo, then {args.configs}", flush=True)
    ok = b.run_solo()
    if ok:
        s = b.solo
        print(f"  solo: {s['requests']} requests p50 {s['p50_ms']:.3f} p99 {s['p99_ms']:.3f} ms; "
              f"training {s['train_steps_per_s']:.2f} steps/s ({s['seconds']:.0f} s)", flush=True)
        for label in filter(None, args.configs.split(",")):
            b.run_config(label)
            x = b.results["configs"].get(label, {})
            if "p99_ms" in x:
                print(f"  {label}: p99 {x['p99_ms']:.3f} ms = {x['p99_vs_solo']:.2f}x solo, "
                      f"training {x['train_vs_solo']:.3f} of solo ({x['seconds']:.0f} s)",
                      flush=True)
        b.results["solo"] = {k: v for k, v in b.solo.items() if k != "latencies"}
    b.results["seconds"] = time.time() - t0
    with open(os.path.join(args.out, "latency-results.json"), "w") as f:
        json.dump(b.results, f, indent=1)
    subprocess.run(["tar", "czf", os.path.join(args.out, "latency-runs.tar.gz"), "-C", args.out,
                    "--exclude=*.sock", "--exclude=latency/mps/pipe", "latency"], check=False)
    shutil.rmtree(b.work, ignore_errors=True)
    print(table(b.results), flush=True)
    return 1 if b.results["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
