#!/usr/bin/env python3
"""space_end.py - a job scheduler's SIGTERM to an MPS client of a fault domain, with and
without the shim's handler (docs/space.md, "Ending a member without faulting its
neighbours"), on the GPU; the spaceend section of scripts/gpu-suite.

A private kairosd in space mode has two tenants in fault domain infer: serve runs the
neighbour (kernel_stream, short kernels, for --neighbour-seconds), train the victim
(tests/gpu/space_end_victim.py: long fp32 matrix products in flight). Once the victim is
busy, it gets SIGTERM. Two cases, interleaved over --rounds:
  protected    the shim's handler: kairosd ends the victim's MPS client
               (terminate_client), then SIGTERM ends it
  unprotected  the victim put SIGTERM back to its default action after CUDA started
               (the control: what a SIGTERM does to a domain without Kairos's handler)
For each: how the victim ended and how long after the SIGTERM, whether the neighbour
ran to its end without a CUDA error, and kairosd's line about the end. Writes
OUT/space-end/results.json and prints a table last. Skipped with a line where
nvidia-cuda-mps-control is missing.
Usage: space_end.py --bin DIR --out DIR [--python PY] [--rounds N] [--neighbour-seconds S]
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import latency_bench  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
BUSY_DEADLINE_S = 120   # the victim's torch start and first products
IN_FLIGHT_S = 1.0       # a bounded wait: the victim's products queued and running


def read_until(proc, prefix):
    """The first line of proc's stdout that starts with prefix; None once it ends."""
    for line in proc.stdout:
        if line.startswith(prefix):
            return line.strip()
    return None


def one(a, env, work, case, rnd, kairosd_log):
    tag = f"{case}-{rnd}"
    nb_path = os.path.join(work, f"neighbour-{tag}.txt")
    with open(nb_path, "w") as nb_out, open(os.path.join(work, f"victim-{tag}.err"), "w") as v_err:
        neighbour = subprocess.Popen(
            [a.kairos, "run", "--tenant", "serve", "--", a.stream, "--seconds",
             str(a.neighbour_seconds)], stdout=nb_out, stderr=subprocess.STDOUT, env=env)
        victim = subprocess.Popen(
            [a.kairos, "run", "--tenant", "train", "--", a.python,
             os.path.join(HERE, "space_end_victim.py")]
            + (["--unprotect"] if case == "unprotected" else []),
            stdout=subprocess.PIPE, stderr=v_err, text=True, env=env)
        r = {"case": case, "round": rnd}
        pid_line = read_until(victim, "pid=")
        busy = read_until(victim, "busy") if pid_line else None
        if not busy:
            victim.kill()
            r["error"] = "the victim did not start its work (see its .err file)"
        else:
            time.sleep(IN_FLIGHT_S)
            pid = int(pid_line.split("=")[1])
            t0 = time.monotonic()
            os.kill(pid, signal.SIGTERM)
            try:
                victim.wait(30)
            except subprocess.TimeoutExpired:
                victim.kill()
            r.update(victim_pid=pid, victim_exit=victim.returncode,
                     end_ms=round((time.monotonic() - t0) * 1000, 1))
        victim.wait()
        try:
            neighbour.wait(a.neighbour_seconds + 60)
        except subprocess.TimeoutExpired:
            neighbour.kill()
            neighbour.wait()
    text = open(nb_path).read()
    errors = [line for line in text.splitlines() if line.startswith("error=")]
    r.update(neighbour_exit=neighbour.returncode, neighbour_error=errors[0] if errors else "",
             neighbour_intact=neighbour.returncode == 0 and not errors)
    log = open(kairosd_log).read()
    pid = r.get("victim_pid")
    r["kairosd_line"] = next((line.strip() for line in log.splitlines()
                              if pid and f"pid {pid} ends at its SIGTERM" in line), "")
    print(f"  {tag}: {json.dumps(r)}", flush=True)
    return r


def quit_domains(root, control):
    """Asks every control daemon kairosd started under root to quit (kairosd leaves them
    running for their clients)."""
    for entry in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        pipe = os.path.join(root, entry, "pipe")
        if os.path.exists(os.path.join(pipe, "control")):
            subprocess.run([control], input="quit\n", text=True, timeout=30,
                           env=dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=pipe))


def table(results):
    lines = ["case         rounds  neighbour intact  victim ended after (median ms)  "
             "victim exits"]
    for case in ("protected", "unprotected"):
        rs = [r for r in results if r["case"] == case and "error" not in r]
        if not rs:
            lines.append(f"{case:<12} 0")
            continue
        intact = sum(r["neighbour_intact"] for r in rs)
        ends = statistics.median(r["end_ms"] for r in rs)
        exits = ",".join(str(r["victim_exit"]) for r in rs)
        lines.append(f"{case:<12} {len(rs):<7} {intact}/{len(rs):<15} {ends:<31.1f} {exits}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--neighbour-seconds", type=int, default=25)
    ap.add_argument("--mps-control", default="nvidia-cuda-mps-control")
    a = ap.parse_args()
    a.kairos, a.stream = os.path.join(a.bin, "kairos"), os.path.join(a.bin, "kernel_stream")
    control = shutil.which(a.mps_control)
    if not control:
        print(f"space-end: skipped: no {a.mps_control} on this machine")
        return 0
    work = os.path.join(a.out, "space-end")
    os.makedirs(work, exist_ok=True)
    d = latency_bench.Daemon(work, "space-end", {"train": {}, "serve": {}}, None,
                             [f"space: {{ mps_control: {control} }}"], "40G", "infer")
    results = []
    try:
        if not d.start(os.path.join(a.bin, "kairosd"), []):
            print(f"space-end: kairosd did not start (see {d.log_path})")
            return 1
        env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_MPS_")}
        env.update(KAIROS_SHIM_CONF=d.shim_conf, KAIROS_LOG="stderr")
        for rnd in range(1, a.rounds + 1):
            for case in ("protected", "unprotected"):
                results.append(one(a, env, work, case, rnd, d.log_path))
    finally:
        d.stop()
        quit_domains(os.path.join(os.path.dirname(d.sock), "mps"), control)
    with open(os.path.join(work, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    print("--- space-end: a SIGTERM to a busy MPS client, its neighbour in the same domain")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
