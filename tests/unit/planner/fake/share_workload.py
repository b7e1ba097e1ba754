#!/usr/bin/env python3
"""Fake workload for test_profile_shares.py: under an MPS percentage p, throughput
1000 x (p / 100) (only 100 % matters there); as a kairosd tenant (KAIROS_TENANT set by
kairos run), 1000 x sqrt(limit), the GPU-time cap kairosd holds for its tenant as
`kairos ps --json` ($FAKE_KAIROS) shows it: a concave, launch-bound curve. Logs each run
to $FAKE_LOG; prints no throughput as a tenant when FAKE_FAIL_SHARES is set."""
import json
import os
import subprocess

tenant = os.environ.get("KAIROS_TENANT")
pct = os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")
limit = None
if tenant:
    ps = subprocess.run([os.environ["FAKE_KAIROS"], "ps", "--json"], capture_output=True,
                        text=True, check=True, env=dict(os.environ, LD_PRELOAD=""))
    me = [t for t in json.loads(ps.stdout)["tenants"] if t["name"] == tenant][0]
    limit = me["gpus"][0]["compute"]["limit"]
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(f"run {tenant or '-'} {pct or '-'} {limit}\n")
print("warming up")
if tenant and os.environ.get("FAKE_FAIL_SHARES"):
    print("no result")
elif tenant:
    print("throughput=%.6f" % (1000 * limit ** 0.5))
else:
    print("throughput=%.6f" % (1000 * int(pct or 100) / 100))
print("memory_mib=1234")
