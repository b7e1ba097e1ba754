#!/usr/bin/env python3
"""The planned section of scripts/gpu-suite (issue 28): does a plan that `kairos plan --emit`
wrote, applied to kairosd as written, give each workload its target on the GPU?

Three workloads of the profile section (tests/gpu/profile_workload.py), each with a target
as a fraction of what it does alone on the whole GPU (WORKLOADS), their tables read from
--profiles DIR (the profile section's, measured on the same machine). Two plans for one
GPU of the tables' model, each emitted with --emit and applied unchanged:
  time   kairos plan --algo temporal --interference kairos: time shares of the whole GPU,
         written as kairosd compute shares (the time-share curves of the tables included);
  space  kairos plan --slices mps: the workloads' MIG options as SM caps (sms:) of one
         fault domain in kairosd's space mode.
Every repetition (--reps, interleaved) runs the rounds: solo-W (W alone, no Kairos: the
base of its target), native (the three together under the driver's time-slicing, no
Kairos: what the plans are compared with), then time and space (the three together, each
`kairos run --tenant W` under a private kairosd whose tenants: are the emitted file's).
Every workload of a round warms up, says it is ready, runs --settle seconds unmeasured
(kairosd's time shares settle: on an H100 its auto mode went native -> slices ->
windows -> slices in the first 3.5 s of contention), and all measure over the same
--seconds. Under kairosd each process is checked: the shim mapped, and under space its
MPS pipe and its SM cap (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) the emitted sms:.
Figure: a round's throughput / (target x the median of the workload's solo rounds); a plan
meets a target when the median of that ratio is >= 1. Writes OUT/planned-results.json
(every round) and OUT/planned.tsv (config, workload, target, median ratio), both anew
after every round, and at the end OUT/planned-runs.tar.xz (plans, kairosd logs, workload
logs); prints a table last. Exit 1
when a plan or a round failed (each named in "failures"); a missed target is a figure.
--dry-run: workloads that sleep instead of using torch, the real kairos plan, kairosd
and `kairos run` (tests/system/test_planned_bench.py).
Usage: planned_bench.py --kairos FILE [--kairosd FILE] --profiles DIR --out DIR
                        [--reps N] [--seconds S] [--settle S] [--python FILE] [--dry-run]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harm_bench  # noqa: E402  (what the shim said of a process's route; MPS clients)
import latency_bench  # noqa: E402  (its private kairosd)

# name, profile table (its file name less .yaml), profile_workload.py arguments, target
WORKLOADS = [("train", "transformer-train-bs8", ["transformer-train", "--batch", "8"], 0.40),
             ("inf64", "resnet50-inf-bs64", ["resnet50-inf", "--batch", "64"], 0.30),
             ("inf8", "resnet50-inf-bs8", ["resnet50-inf", "--batch", "8"], 0.20)]
PLANS = {"time": ["--algo", "temporal", "--interference", "kairos"],
         "space": ["--slices", "mps"]}
STAND_IN = os.path.normpath(os.path.join(HERE, "..", "stand-ins", "nvidia-cuda-mps-control"))


def table_model(path):
    """The model: line of a kairos profile table."""
    with open(path) as f:
        for line in f:
            if line.startswith("model:"):
                return line.split(":", 1)[1].strip()
    raise ValueError(f"{path}: no model: line")


def cluster_yaml(profiles):
    """The planner's input: one GPU of the tables' model and the three workloads."""
    paths = {table: os.path.abspath(os.path.join(profiles, table + ".yaml"))
             for _, table, _, _ in WORKLOADS}
    models = {table_model(p) for p in paths.values()}
    if len(models) != 1:
        raise ValueError(f"the tables in {profiles} name several models: {sorted(models)}")
    lines = ["gpus:", f"  - model: {models.pop()}", "    count: 1", "workloads:"]
    for name, table, _, target in WORKLOADS:
        lines += [f"  - name: {name}", f"    profile: {paths[table]}",
                  f"    target_fraction: {target}"]
    return "\n".join(lines) + "\n"


def emitted_tenants(path):
    """The tenants: list of an emitted kairosd-node<N>.yaml (the lines under tenants:)."""
    with open(path) as f:
        lines = f.read().splitlines()
    if "tenants:" not in lines:
        raise ValueError(f"{path}: no tenants: line")
    return "\n".join(lines[lines.index("tenants:") + 1:]) + "\n"


def emitted_sms(tenants_text):
    """name -> the sms: percentage (as a string of digits) of each emitted tenant."""
    sms, name = {}, None
    for line in tenants_text.splitlines():
        s = line.strip()
        if s.startswith("- name:"):
            name = s.split(":", 1)[1].strip()
        elif s.startswith("sms:") and name:
            sms[name] = s.split(":", 1)[1].split("#")[0].strip().rstrip("%")
    return sms


def median_or_none(values):
    return statistics.median(values) if values else None


class Round:
    """The workloads of one round, started together, measured over the same seconds."""

    def __init__(self, bench, label, names, daemon=None):
        self.b, self.label, self.names, self.daemon = bench, label, names, daemon
        self.dir = os.path.join(bench.work, f"{bench.seq:03d}-{label}")
        os.makedirs(self.dir)
        self.procs, self.logs, self.placement = {}, {}, {}

    def command(self, name):
        a = self.b.args
        spec = next(w for w in WORKLOADS if w[0] == name)
        cmd = [a.python, os.path.join(HERE, "profile_workload.py")] + spec[2] + [
            "--seconds", str(a.seconds), "--settle", str(a.settle),
            "--ready", os.path.join(self.dir, name + ".ready")]
        cmd += ["--dry-run", "--dry-step-ms", str(a.dry_step_ms)] if a.dry_run else []
        if self.daemon:
            cmd = [self.b.kairos, "run", "--tenant", name, "--"] + cmd
        return cmd

    def start(self):
        env = dict(os.environ)
        if self.daemon:  # the shim says where it routed the process (space) in the log
            env["KAIROS_SHIM_CONF"] = self.daemon.shim_conf
            env["KAIROS_SOCKET"] = self.daemon.sock
            env["KAIROS_LOG"] = "stderr"
        for name in self.names:
            log = open(os.path.join(self.dir, name + ".log"), "w")
            self.logs[name] = log
            self.procs[name] = subprocess.Popen(self.command(name), env=env, stdout=log,
                                                stderr=subprocess.STDOUT,
                                                start_new_session=True)

    def ready_pid(self, name):
        try:
            with open(os.path.join(self.dir, name + ".ready")) as f:
                return int(f.read().split("=", 1)[1])
        except (OSError, ValueError, IndexError):
            return None

    def wait_ready(self, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if all(self.ready_pid(n) is not None for n in self.names):
                return None
            for name, p in self.procs.items():
                if p.poll() is not None:
                    return f"{name} exited {p.returncode} before it was ready"
            time.sleep(0.02)
        return f"not ready after {timeout:.0f} s: " + ", ".join(
            n for n in self.names if self.ready_pid(n) is None)

    def look(self, name):
        """The workload's process as it runs: {"pid", "shim": libkairos mapped, "space":
        what the shim said of its route (fault domain, MPS pipe, active thread percentage)
        or None, "mps_client": the control daemon of that pipe names it among its server's
        clients}; None once it is gone."""
        pid = self.ready_pid(name)
        try:
            with open(f"/proc/{pid}/maps") as f:
                shim = "libkairos" in f.read()
            with open(os.path.join(self.dir, name + ".log")) as f:
                log = f.read()
        except OSError:
            return None
        said = harm_bench.space_route(log, pid)
        client = said is not None and pid in harm_bench.mps_clients(self.b.mps_control(),
                                                                    said["pipe"])
        return {"pid": pid, "shim": shim, "space": said, "mps_client": client}

    def run(self):
        """Runs the round; returns (throughput by workload, failure or None)."""
        self.start()
        try:
            why = self.wait_ready(self.b.args.ready_timeout)
            if why:
                return {}, why
            self.placement = {n: self.look(n) for n in self.names}
            with open(os.path.join(self.dir, "go"), "w") as f:
                f.write(f"{time.time():.6f}\n")
            deadline = time.time() + self.b.args.settle + self.b.args.seconds + 60
            for name, p in self.procs.items():
                try:
                    p.wait(timeout=max(1.0, deadline - time.time()))
                except subprocess.TimeoutExpired:
                    return {}, f"{name} still runs 60 s after its measured seconds"
            figures = {}
            for name, p in self.procs.items():
                self.logs[name].flush()
                thr = self.throughput(name)
                if p.returncode != 0 or thr is None:
                    return figures, f"{name} exited {p.returncode} (see {self.logs[name].name})"
                figures[name] = thr
            return figures, None
        finally:
            for p in self.procs.values():
                if p.poll() is None:
                    os.killpg(p.pid, 9)
                    p.wait()
            for log in self.logs.values():
                log.close()

    def throughput(self, name):
        with open(os.path.join(self.dir, name + ".log")) as f:
            for line in f:
                if line.startswith("throughput="):
                    return float(line.split("=", 1)[1])
        return None


class Bench:
    def __init__(self, args):
        self.args = args
        self.kairos = args.kairos
        self.kairosd = args.kairosd or os.path.join(os.path.dirname(args.kairos), "kairosd")
        self.work = os.path.join(args.out, "planned")
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work)
        self.seq = 0
        self.plans = {}      # config -> emitted tenants text
        self.rounds = []     # every round: seq, rep, config, figures, placement, failure
        self.failures = []

    def make_plans(self):
        cluster = os.path.join(self.work, "cluster.yaml")
        with open(cluster, "w") as f:
            f.write(cluster_yaml(self.args.profiles))
        for config, options in PLANS.items():
            emit = os.path.join(self.work, f"plan-{config}")
            cmd = [self.kairos, "plan"] + options + ["--emit", emit, cluster]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            with open(os.path.join(self.work, f"plan-{config}.txt"), "w") as f:
                f.write(" ".join(cmd) + "\n" + r.stdout + r.stderr)
            print(f"  plan {config}: " + " ".join(cmd[1:]), flush=True)
            print("    " + "\n    ".join(r.stdout.strip().splitlines()), flush=True)
            node = os.path.join(emit, "kairosd-node0.yaml")
            if r.returncode != 0 or not os.path.exists(node):
                self.failures.append({"config": config, "why": "kairos plan exited "
                                      f"{r.returncode}: {r.stderr.strip()[-300:]}"})
                continue
            self.plans[config] = emitted_tenants(node)

    def mps_control(self):
        """The MPS control program kairosd runs for a domain: the stand-in in a dry run."""
        return STAND_IN if self.args.dry_run else shutil.which(self.args.mps_control)

    def daemon(self, config):
        more = ["gpus: 1"] if self.args.dry_run else []
        if config == "space":
            more.append(f"space: {{ mps_control: {self.mps_control()} }}")
        label = f"{self.seq:03d}-{config}"
        d = latency_bench.Daemon(self.work, label, None, None, more,
                                 tenants_text=self.plans[config])
        if not d.start(self.kairosd, []):
            d.stop()
            return None
        return d

    def quit_domains(self, d):
        """The MPS control daemon kairosd ran for the space plan's domain: kairosd leaves
        it to its next start, this bench has none (kairosd --quit-domains, kairosd stopped)."""
        r = subprocess.run([self.kairosd, "-c", d.config, "--quit-domains"], text=True,
                           capture_output=True, timeout=60)
        with open(d.log_path, "a") as f:
            f.write(r.stdout + r.stderr)

    def run_round(self, rep, config, names):
        self.seq += 1
        d = None
        if config in PLANS:
            d = self.daemon(config)
            if d is None:
                self.fail(rep, config, f"kairosd did not start (see kairosd-{self.seq:03d}-"
                          f"{config}.log)")
                return
        rnd = Round(self, config if config in PLANS or config == "native" else f"solo-{names[0]}",
                    names, d)
        try:
            figures, why = rnd.run()
        finally:
            if d:
                d.stop()
                if config == "space":
                    self.quit_domains(d)
        why = why or self.placement_error(config, rnd.placement)
        self.rounds.append({"seq": self.seq, "rep": rep, "config": config, "names": names,
                            "figures": figures, "placement": rnd.placement, "failure": why})
        if why:
            self.fail(rep, config, why)
        self.write()  # after every round: a run cut short keeps what it measured
        print(f"  rep {rep} {rnd.label:12} " + " ".join(f"{n}={v:.1f}" for n, v in
                                                      figures.items()) + (f"  FAILED: {why}"
                                                                          if why else ""),
              flush=True)

    def placement_error(self, config, placement):
        """Why a workload of a plan's round did not run as the plan says, or None: each
        under the shim; under space, each a client of its domain's MPS server with the
        SM cap the plan emitted."""
        if config not in PLANS:
            return None
        sms = emitted_sms(self.plans[config])
        for name, seen in placement.items():
            if not seen or not seen["shim"]:
                return f"{name} ran without the shim"
            if config != "space":
                continue
            said = seen["space"]
            if not said:
                return f"{name}: the shim said no route into a fault domain (its log)"
            if said["percentage"] != sms.get(name):
                return (f"{name}'s SM cap is {said['percentage']} %, the plan's sms: "
                        f"{sms.get(name)} %")
            if not seen["mps_client"]:
                return f"{name} is not a client of its domain's MPS server ({said['pipe']})"
        return None

    def fail(self, rep, config, why):
        self.failures.append({"rep": rep, "config": config, "why": why})

    def run(self):
        self.make_plans()
        names = [w[0] for w in WORKLOADS]
        for rep in range(1, self.args.reps + 1):
            for name in names:
                self.run_round(rep, "solo", [name])
            configs = ["native"] + [c for c in PLANS if c in self.plans]
            k = (rep - 1) % len(configs)  # the configurations' order turns each repetition
            for config in configs[k:] + configs[:k]:
                self.run_round(rep, config, names)

    def solo(self, name):
        return median_or_none([r["figures"][name] for r in self.rounds
                               if r["config"] == "solo" and name in r["figures"]])

    def results(self):
        """config -> workload -> {"target", "ratios", "median"}; ratios of throughput to
        the target's throughput (target x solo median)."""
        out = {}
        for config in ["native"] + list(PLANS):
            rows = {}
            for name, _, _, target in WORKLOADS:
                base = self.solo(name)
                ratios = [r["figures"][name] / (target * base) for r in self.rounds
                          if r["config"] == config and not r["failure"] and base
                          and name in r["figures"]]
                rows[name] = {"target": target, "solo": base, "ratios": ratios,
                              "median": median_or_none(ratios)}
            out[config] = rows
        return out

    def write(self):
        res = self.results()
        doc = {"gpu": self.args.gpu, "driver": self.args.driver,
               "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
               "dry_run": self.args.dry_run, "reps": self.args.reps,
               "seconds": self.args.seconds, "settle": self.args.settle,
               "workloads": WORKLOADS, "plans": self.plans,
               "rounds": self.rounds, "results": res, "failures": self.failures}
        with open(os.path.join(self.args.out, "planned-results.json"), "w") as f:
            json.dump(doc, f, indent=1)
        with open(os.path.join(self.args.out, "planned.tsv"), "w") as f:
            f.write("config\tworkload\ttarget\tmedian_of_target\trounds\n")
            for config, rows in res.items():
                for name, row in rows.items():
                    m = "-" if row["median"] is None else f"{row['median']:.3f}"
                    f.write(f"{config}\t{name}\t{row['target']}\t{m}\t{len(row['ratios'])}\n")
        return res

    def pack(self):
        with tarfile.open(os.path.join(self.args.out, "planned-runs.tar.xz"), "w:xz") as t:
            t.add(self.work, arcname="planned")

    def print_table(self, res):
        print(f"\n=== planned: emitted plans applied to kairosd; {self.args.gpu}, driver "
              f"{self.args.driver}; medians of {self.args.reps} interleaved repetitions"
              + ("; DRY RUN (no GPU)" if self.args.dry_run else ""))
        print("throughput / target (target = fraction x solo median; >= 1: target met)")
        configs = list(res)
        print(f"{'workload':10}{'target':>8}{'solo':>10}" + "".join(f"{c:>10}" for c in configs))
        def cell(value, fmt):
            return f"{'-' if value is None else format(value, fmt):>10}"
        for name, _, _, target in WORKLOADS:
            cells = "".join(cell(res[c][name]["median"], ".3f") for c in configs)
            print(f"{name:10}{target:8.2f}{cell(res[configs[0]][name]['solo'], '.1f')}{cells}")
        met = {c: sum(1 for row in res[c].values() if row["median"] is not None
                      and row["median"] >= 1.0) for c in configs}
        print(f"{'met':28}" + "".join(f"{met[c]:>8}/{len(WORKLOADS)}" for c in configs))
        for f in self.failures:
            print(f"FAILED: {f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kairos", required=True, help="the kairos command")
    ap.add_argument("--kairosd", help="kairosd (default: beside --kairos)")
    ap.add_argument("--profiles", required=True, help="folder of the workloads' tables")
    ap.add_argument("--out", required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--settle", type=float, default=5,
                    help="seconds the workloads run together before the measured ones")
    ap.add_argument("--ready-timeout", type=float, default=240)
    ap.add_argument("--mps-control", default="nvidia-cuda-mps-control")
    ap.add_argument("--gpu", default="unknown GPU")
    ap.add_argument("--driver", default="unknown")
    ap.add_argument("--dry-run", action="store_true", help="no torch, no GPU (CPU test)")
    ap.add_argument("--dry-step-ms", type=float, default=10)
    args = ap.parse_args()
    bench = Bench(args)
    bench.run()
    bench.pack()
    bench.print_table(bench.write())
    return 1 if bench.failures else 0


if __name__ == "__main__":
    sys.exit(main())
