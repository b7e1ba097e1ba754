#!/usr/bin/env python3
"""Workloads of the bench cases that Kairos's plan puts in a MIG instance with other
workloads (all, and with unequal time shares), with and without --mig-time-sharing.
Usage: count-mig-sharing.py KAIROS DATA_DIR"""
import glob
import json
import subprocess
import sys

kairos, data = sys.argv[1], sys.argv[2]
for extra in ([], ["--mig-time-sharing"]):
    total = shared = unequal = 0
    for path in sorted(glob.glob(f"{data}/*/*.yaml")):
        if "/pools/" in path or "/profiles/" in path:
            continue
        r = subprocess.run([kairos, "plan", "--json", *extra, path], capture_output=True, text=True)
        plan = json.loads(r.stdout)
        total += plan["summary"]["placed"]
        for g in plan["gpus"]:
            for i in g["instances"] if g["mig"] else []:
                ws = i["workloads"]
                if len(ws) > 1:
                    shared += len(ws)
                    unequal += len(ws) if len({w["t"] for w in ws}) > 1 else 0
    print(f"{' '.join(extra) or 'default'}: {total} workloads placed, {shared} in a shared MIG "
          f"instance, {unequal} of them with unequal time shares")
