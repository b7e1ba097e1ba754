#!/usr/bin/env python3
"""The metrics section's helper (tests/gpu/metrics.sh), standard library only (the
GPU machine may lack prometheus_client):
  scrape PORT          print one scrape of http://127.0.0.1:PORT/metrics
  time PORT N          N scrapes: time to the whole text, in ms (p50, max)
  summary DIR          the snapshots of DIR as one JSON document: per snapshot the
                       samples, and whether memory held, quota, refusals and members
                       agree with its kairos ps --json
  table RESULTS.json   a short table of it"""
import json
import os
import re
import sys
import time
import urllib.request

SAMPLE = re.compile(r'^([a-z_:][a-z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-z_]+)="((?:[^"\\]|\\.)*)"')


def fetch(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


def parse(text):
    out = []
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m:
            labels = {k: v.replace('\\"', '"').replace("\\\\", "\\")
                      for k, v in LABEL.findall(m.group(2) or "")}
            out.append((m.group(1), labels, float(m.group(3))))
    return out


def agree(samples, ps):
    """Memory held, quota, refusals and members of every tenant: scrape vs ps."""
    got = {}
    for name, labels, v in samples:
        got[(name, labels.get("tenant"), labels.get("gpu"))] = v
    bad = []
    for t in ps["tenants"]:
        if got.get(("kairos_tenant_members", t["name"], None)) != t["processes"]:
            bad.append(f"{t['name']} members")
        for g in t["gpus"]:
            for metric, key in (("kairos_tenant_memory_held_bytes", "held"),
                                ("kairos_tenant_memory_quota_bytes", "quota"),
                                ("kairos_tenant_allocations_refused_total", "refusals")):
                v = got.get((metric, t["name"], str(g["index"])), 0)
                if v != g[key]:
                    bad.append(f"{t['name']} GPU {g['index']} {key}: {v} vs {g[key]}")
    return bad


def summary(d):
    snaps = {}
    for name in ("idle", "running-1", "running-2", "after"):
        with open(os.path.join(d, name + ".prom")) as f:
            samples = parse(f.read())
        with open(os.path.join(d, name + ".ps.json")) as f:
            ps = json.load(f)
        snaps[name] = {"samples": [[n, lab, v] for n, lab, v in samples],
                       "disagree_with_ps": agree(samples, ps)}
    with open(os.path.join(d, "scrape-times.txt")) as f:
        times = dict(kv.split("=") for kv in f.read().split())
    return {"snapshots": snaps, "scrape_ms": times}


def table(path):
    with open(path) as f:
        r = json.load(f)
    print(f"scrape with NVML: p50 {r['scrape_ms']['p50_ms']} ms, max {r['scrape_ms']['max_ms']} ms")
    for name, s in r["snapshots"].items():
        print(f"{name}: agrees with kairos ps: "
              f"{'yes' if not s['disagree_with_ps'] else s['disagree_with_ps']}")
    want = ("kairos_tenant_members", "kairos_tenant_memory_held_bytes", "kairos_tenant_memory_quota_bytes",
            "kairos_tenant_allocations_refused_total", "kairos_tenant_compute_target_ratio",
            "kairos_tenant_compute_achieved_minute_ratio", "kairos_tenant_pauses_total",
            "kairos_gpu_memory_used_bytes", "kairos_gpu_memory_total_bytes",
            "kairos_gpu_utilization_ratio", "kairos_gpu_temperature_celsius",
            "kairos_gpu_power_watts", "kairos_gpu_info")
    print(f"{'metric (running-2)':48} {'labels':34} value")
    for n, lab, v in r["snapshots"]["running-2"]["samples"]:
        if n in want:
            labs = ",".join(f"{k}={v2}" for k, v2 in lab.items())
            print(f"{n:48} {labs[:34]:34} {v:.0f}" if v.is_integer() else
                  f"{n:48} {labs[:34]:34} {v:.4g}")


def main():
    cmd = sys.argv[1]
    if cmd == "scrape":
        sys.stdout.write(fetch(int(sys.argv[2])))
    elif cmd == "time":
        ms = []
        for _ in range(int(sys.argv[3])):
            t0 = time.monotonic()
            fetch(int(sys.argv[2]))
            ms.append((time.monotonic() - t0) * 1000)
        ms.sort()
        print(f"p50_ms={ms[len(ms) // 2]:.2f} max_ms={ms[-1]:.2f}")
    elif cmd == "summary":
        json.dump(summary(sys.argv[2]), sys.stdout, indent=1)
    elif cmd == "table":
        table(sys.argv[2])


if __name__ == "__main__":
    main()
