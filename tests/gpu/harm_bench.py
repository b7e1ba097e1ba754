#!/usr/bin/env python3
"""The "do no harm" benchmark (issue 23, section 4), run by scripts/gpu-suite harm.

Kairos against doing nothing (native time-slicing) and against MPS at its best, on real
PyTorch work, side by side in one invocation. Every mix of the table below runs in each
configuration: native; mps (a private nvidia-cuda-mps-control with its own pipe and log
folders, quit at the end of the mix, on failure too; skipped with a line where the
machine has none); kairos (a private kairosd with the mix's policies and no time_mode
line: kairosd's default is what is measured); kairos-MODE (time_mode MODE) where named.
Each mix is repeated --reps times, interleaved (repetition 1: its solo rounds, native,
mps, kairos; repetition 2: its solo rounds, mps, kairos, native; each repetition the
configurations' order turned by one, so that none always runs first or last: on the
H100 the rates climbed within a repetition, native first 524 and kairos last 543, then
601 and 645, bench/results/2026-12-07-harm), and every figure is taken against the same
repetition's solo; harm.tsv holds the medians over the repetitions.

Every configuration's PyTorch tenants are started once per mix, all at the same time, and
stay alive, idle, outside their own rounds (tests/gpu/latency_tenant.py --rounds): such a
process takes ~14 s to import torch and warm up on the H200, too long to pay each round.
kernel_stream tenants start afresh each round (~1 s). Solo rounds run the native
configuration's tenants alone (the others alive and idle).

The mixes (HARM_MIXES: names, or the groups quick, the default, and space, the five
space- mixes):
  infer4         4 processes of ResNet-50 batch 1 eager inference (launch-bound on
                 purpose), closed loop; kairos: share 25 % each, no limit. Metrics
                 aggregate_rps, aggregate_of_solo (against one process alone), p99_ms
                 (the worst process's), p99_of_solo. infer2, infer8: 2 and 8 processes;
                 infer4-tf: the transformer encoder at batch 4; infer4-open: open loop,
                 Poisson arrivals every --open-gap-ms on average per process, latency
                 from arrival (infer8-open: 8 processes at half that rate each).
  latency-train  the latency section's tenants: ResNet-50 batch 8 requests (one CUDA
                 graph each, seeded exponential idle gaps of 6 ms) starting --lead-s into
                 ResNet-50 training (batch 256); kairos: inference priority latency,
                 training priority batch, share 50 % each; mps: CUDA_MPS_CLIENT_PRIORITY
                 0 for the inference, 1 for the training. Metrics p99_ms, p99_of_solo
                 (the inference alone), training_of_solo (the training's steps/s against
                 its solo), aggregate_of_solo (that and the inference's requests/s
                 against its solo, summed: the work both did). Closed loop, a request
                 after the gap that follows the last one's completion: a faster answer
                 brings the next request sooner, so the inference does more work where
                 its latency is lower, and the training has less of the GPU.
                 latency-train-open: the same requests at seeded Poisson arrivals (a
                 gap between arrivals, latency from arrival):
                 the same work in every configuration.
  train-pair     ResNet-50 training (batch 128, share 70 %) next to transformer-encoder
                 training (batch 128, share 30 %), --train-seconds a round. Metrics
                 aggregate_of_solo (the sum of each one's steps/s over its solo's) and
                 share_err_pp (the larger distance, in points, between a tenant's part
                 of that sum and its share; native and MPS show what no shares give).
  deep2, deep4, deep8, deep4-uneq
                 deep kernel streams (kernel_stream, 256 short kernels then a sync) at
                 equal shares, or 40/30/20/10; the same metrics as train-pair, against
                 one stream alone.
  train-infer-uneq
                 the planned section's mix (docs/planner.md: kairosd's time plan cost it
                 0.83x native's work there): transformer-encoder training at batch 8
                 (mostly on the CPU: alone it kept an H100 busy about a quarter of the
                 time), share 40 %, next to ResNet-50 inference at batch 64 (30 %) and at
                 batch 8 (20 %), both closed loop with no gap. Shares a tenant that
                 cannot use them meets unequal ones: no share error judges it, the work
                 done does. Metrics aggregate_of_solo (the three's rates over their solo
                 rates, summed), p99_ms and p99_of_solo (the batch-8 inference's).
  lend           ResNet-50 training (share 50 %) next to an inference process that is
                 alive and warmed up but never asked for anything (share 50 %): the busy
                 tenant should keep the whole GPU. Metric aggregate_of_solo against its
                 native round (the idle process lives there too).
  limit-long     one kernel_stream of ~200 ms kernels (8, then a sync) alone; kairos:
                 limit 30 %. Its solo is the native run of the same repetition (native's
                 aggregate_of_solo is 1 by definition; native and MPS have no limit, so
                 theirs is only what they do alone). Metrics aggregate_of_solo, and
                 share_err_pp under Kairos: |aggregate_of_solo - 0.30| in points.
  space-infer2, space-infer4, space-infer8, space-latency-train, space-pair
                 space mode (issue 24): under Kairos every tenant of the mix has
                 fault_domain (infer, serve, pair), so it runs as a client of the MPS
                 control daemon kairosd runs for that domain (kairosd.yaml's space:
                 mps_control: in a dry run the stand-in tests/stand-ins/
                 nvidia-cuda-mps-control, else --mps-control where found). The tenants and
                 metrics of infer2, infer4, infer8 (no shares), latency-train (priorities
                 latency and batch, no shares; kairosd alone sets the MPS client
                 priorities, from them) and train-pair (at 75 %/25 %); mps: plain MPS, or
                 latency-train's client priorities. kairos-memory has no domain.
  space-pair-sms space-pair with each tenant's SMs capped at its share (75 %, 25 %):
                 under Kairos by `sms:` (the shim's line must say that percentage),
                 under MPS by CUDA_MPS_ACTIVE_THREAD_PERCENTAGE set by hand. Not in the
                 group space: it measures whether SM caps can split a domain.
  space-pair-sms80, space-pair-sms85
                 the same shares (75/25, share_err_pp against them) with the SMs capped
                 at 80/20 and 85/15: further points of the curve from SM caps to work.
Goals (the verdict column): a mix without a limit keeps aggregate >= 0.97x native and
the worst p99 <= 1.05x native, and Kairos's share_err_pp <= 1; a limit mix lands within
0.30 +- 0.02 of solo; a space- mix is judged against the mps column (as
shared/hooks/harm-check): aggregate >= 0.98x MPS, p99 <= 1.05x MPS, share_err_pp <= 2;
the table shows kairos/native and kairos/mps. Configuration kairos-memory (not in the
default list): a kairosd whose tenants have only their memory quotas, which tells what
the time control itself costs next to the kairos column; shim-alone: the shim preloaded
on its own (KAIROS_MEM, no kairosd, no `kairos run`), which tells what its interposition
costs next to native.
A tenant that fails, hangs (not done --round-grace-s after its round should have ended),
runs outside the shim under Kairos or shim-alone (under it elsewhere), without this
benchmark's MPS pipe under MPS (with one elsewhere; a space mix's Kairos tenant: without
the shim's line "kairos[PID]: space: fault domain NAME, ..." naming the mix's domain
in its log), or serves its requests with a CUDA graph where native had none (or the
reverse) fails its configuration for the rest of the mix: its processes are killed, it
is listed in "failures", its column reads "-", and the exit status is 1; the other
configurations and mixes are still measured and written.
Writes OUT/harm-results.json (every round's raw figures in the order they ran),
OUT/harm.tsv (both rewritten after each mix: a run cut short keeps the mixes it
finished) and OUT/harm-runs.tar.gz (kairosd logs, tenant logs, stamps); prints its
table last. --save DIR copies what came back from the GPU machine into
bench/results/DATE-harm/ with a README.md holding the table; --save DIR1,DIR2 saves runs
that measured different mixes on the same GPU and driver (one call's time limit fits only
some mixes) as one result, each mix with the run it was measured in.
--dry-run: tenants with no torch and no GPU (sleeps; tests/gpu/dry_stream.py for
kernel_stream), the same driver, kairosd and `kairos run`: tests/system/test_harm_bench.py.
Usage: harm_bench.py --bin DIR --out DIR [--mixes infer4,...] [--configs native,mps,kairos]
                     [--reps N] [--seconds S] [--dry-run]
       harm_bench.py --save DIR[,DIR...] [--results-root DIR]
"""
import argparse
import gzip
import json
import lzma
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compute_bench  # noqa: E402
import latency_bench  # noqa: E402
import latency_stats as stats  # noqa: E402

AGG_FLOOR, P99_CEIL, LIMIT_TOL, SHARE_TOL_PP = 0.97, 1.05, 0.02, 1.0
SPACE_AGG_FLOOR, SPACE_SHARE_TOL_PP = 0.98, 2.0  # a space mix, against MPS at its best
# the control daemon kairosd runs for a fault domain in a dry run (no MPS there)
SPACE_STAND_IN = os.path.normpath(os.path.join(HERE, "..", "stand-ins",
                                               "nvidia-cuda-mps-control"))
SOLO_LEAD_S = 0.3  # requests start this long into a round without neighbours to settle
LONG_WORK = compute_bench.LONG_WORK * 7 // 6  # FMAs a thread: ~200 ms a kernel on the H200
QUICK = "infer4,latency-train,limit-long"
SPACE = "space-infer2,space-infer4,space-infer8,space-latency-train,space-pair"
GROUPS = {"quick": QUICK, "space": SPACE}  # names HARM_MIXES may use for several mixes
TSV_CONFIGS = ("native", "mps", "kairos")
FORMATS = {"aggregate_rps": ".1f", "aggregate_of_solo": ".4f", "p99_ms": ".3f",
           "p99_of_solo": ".3f", "share_err_pp": ".2f", "training_of_solo": ".4f"}
CONFIG = re.compile(r"native$|mps$|shim-alone$|kairos(?:-(windows|timeslices|auto|memory))?$")


def real(x):
    """Whether x is a number to report (not None, not nan)."""
    return isinstance(x, (int, float)) and x == x


def ratio(a, b):
    """a / b, or None where either is missing or b is 0."""
    return a / b if real(a) and real(b) and b else None


def pick(rounds, label, tenant, key):
    """rounds[label][tenant][key]: a tenant's figure in a round; None where missing."""
    return rounds.get(label, {}).get(tenant, {}).get(key)


# ---- the figures of one round, from the tenants' stamps ------------------------------

def request_figures(stamps):
    """Requests ("START_NS LATENCY_NS"): how many, their rate (over the time from the first
    one's start to the last one's end), p50 and p99 in ms, and that span in ns."""
    st = [s for s in stamps if len(s) == 2]
    if len(st) < 2:
        return {"units": len(st)}
    lat = [b / 1e6 for _, b in st]
    lo, hi = st[0][0], max(a + b for a, b in st)
    return {"units": len(st), "rate": len(st) * 1e9 / (hi - lo),
            "p50_ms": stats.percentile(lat, 0.5), "p99_ms": stats.percentile(lat, 0.99),
            "span_ns": [lo, hi]}


def step_figures(stamps, span):
    """Training steps ("END_NS"): steps/s between the step ends inside span (the requests'
    beside them; None: all of them)."""
    ends = [s[0] for s in stamps if len(s) == 1]
    lo, hi = span or (min(ends, default=0), max(ends, default=0))
    return {"units": len(ends), "rate": stats.rate_between(ends, lo, hi)}


def common_span(stamp_lists):
    """(latest first step end, earliest last step end) over several trainings' stamps:
    the time all of them stepped; None for fewer than two or where they never overlap."""
    ends = [[s[0] for s in st if len(s) == 1] for st in stamp_lists]
    if len(ends) < 2 or not all(ends):
        return None
    lo, hi = max(min(e) for e in ends), min(max(e) for e in ends)
    return (lo, hi) if hi > lo else None


def kernel_figures(stamps, start_ns, seconds):
    """kernel_stream's kernels ("END_NS"): kernels/s between the first and the last end
    after the start (long kernels: no part-kernel at either edge)."""
    n, span = compute_bench.rate_span(sorted(s[0] for s in stamps if s[0] >= start_ns), seconds)
    return {"units": n, "rate": n / span if span else float("nan")}


# ---- the mixes -------------------------------------------------------------------------

class Mix:
    """A mix: its tenants [(name, kind, opts)] (kind infer or train: latency_tenant.py;
    stream: kernel_stream), their kairosd policies, the solo rounds of each repetition
    [(label, [names])] (none: a lone tenant, whose native run is its solo), its limit
    (None: judged against native) and its metrics, in harm.tsv's order; domain: the
    fault domain of its Kairos tenants (a space mix, judged against MPS; None: none)."""
    metrics_order = ()
    limit = None
    domain = None
    round_s = None  # a round of tenants that run until told: None, --train-solo-s

    def __init__(self, tenants, policies, solo):
        self.tenants, self.policies, self.solo = tenants, policies, solo

    def names(self):
        return [name for name, _, _ in self.tenants]

    def metrics(self, figs, solo, config):
        """{metric: value or None} of one round of the mix ({tenant: figures}) against
        the solo rounds of its repetition ({label: {tenant: figures}})."""
        raise NotImplementedError


class InferClosed(Mix):
    """n processes of small launch-bound inference, equal shares: closed loop (each
    request sent as the previous one completes), or open loop (Poisson arrivals every
    gap_ms on average, the solo round at the same rate)."""
    metrics_order = ("aggregate_rps", "aggregate_of_solo", "p99_ms", "p99_of_solo")

    def __init__(self, n, args, model="resnet50", batch=1, gap_ms=0.0):
        names = [f"i{k}" for k in range(n)]
        opts = {"batch": batch, "gap_ms": gap_ms, "eager": True, "requests": 200_000,
                "max_s": args.seconds, "model": model, "open_loop": gap_ms > 0}
        super().__init__([(x, "infer", opts) for x in names],
                         {x: {"share": f"{100 / n:g}%"} for x in names}, [("solo", names[:1])])

    def metrics(self, figs, solo, config):
        rates = [f.get("rate") for f in figs.values()]
        p99s = [f.get("p99_ms") for f in figs.values()]
        agg = sum(rates) if all(map(real, rates)) else None
        worst = max(p99s) if all(map(real, p99s)) else None
        return {"aggregate_rps": agg, "aggregate_of_solo": ratio(agg, pick(solo, "solo", "i0",
                                                                          "rate")),
                "p99_ms": worst, "p99_of_solo": ratio(worst, pick(solo, "solo", "i0", "p99_ms"))}


class LatencyTrain(Mix):
    """Requests next to saturating training, the latency section's pair."""
    metrics_order = ("aggregate_of_solo", "training_of_solo", "p99_ms", "p99_of_solo")

    def __init__(self, args, open_loop=False):
        infer = {"batch": 8, "gap_ms": 6.0, "requests": args.requests, "max_s": args.max_s,
                 "lead_s": args.lead_s, "mps_priority": 0, "open_loop": open_loop}
        train = {"batch": 256, "mps_priority": 1}
        super().__init__([("infer", "infer", infer), ("train", "train", train)],
                         latency_bench.LATENCY_POLICY,
                         [("solo-infer", ["infer"]), ("solo-train", ["train"])])

    def metrics(self, figs, solo, config):
        p99 = figs["infer"].get("p99_ms")
        train = ratio(figs["train"].get("rate"), pick(solo, "solo-train", "train", "rate"))
        infer = ratio(figs["infer"].get("rate"), pick(solo, "solo-infer", "infer", "rate"))
        return {"aggregate_of_solo": train + infer if real(train) and real(infer) else None,
                "training_of_solo": train, "p99_ms": p99,
                "p99_of_solo": ratio(p99, pick(solo, "solo-infer", "infer", "p99_ms"))}


def shared_out(fractions, targets):
    """(the sum of the tenants' fractions of solo, the largest distance in points between
    a tenant's part of that sum and its target share); (None, None) where one is missing."""
    if not fractions or not all(map(real, fractions.values())):
        return None, None
    total = sum(fractions.values())
    if total <= 0:
        return total, None
    return total, max(abs(f / total - targets[n]) * 100 for n, f in fractions.items())


class Shares(Mix):
    """Saturating tenants at target shares (training jobs, deep kernel streams). Every
    configuration's share_err_pp says how far each tenant's part of the work done (its
    rate over its solo rate, over the sum of those) lies from its target: Kairos is
    judged by it, native and MPS show what no shares give."""
    metrics_order = ("aggregate_of_solo", "share_err_pp")

    def __init__(self, tenants, targets, solo_of):
        self.targets, self.solo_of = targets, solo_of
        solo = sorted({(f"solo-{s}", s) for s in solo_of.values()})
        super().__init__(tenants, {n: {"share": f"{t * 100:g}%"} for n, t in targets.items()},
                         [(label, [name]) for label, name in solo])

    def metrics(self, figs, solo, config):
        fr = {n: ratio(figs[n].get("rate"), pick(solo, f"solo-{s}", s, "rate"))
              for n, s in self.solo_of.items()}
        total, err = shared_out(fr, self.targets)
        return {"aggregate_of_solo": total, "share_err_pp": err}


class TrainPair(Shares):
    """Two training jobs of different models at 70/30: ResNet-50 (batch 128) and a
    transformer encoder (batch 128); each against its own solo. (At batch 32 the
    encoder did not fill the H200: it kept 1.0 of its solo speed next to ResNet-50
    natively, so parts of the work done said nothing of shares: 2026-12-05-harm-3.)"""

    def __init__(self, args, cnn=0.70):
        self.round_s = args.train_seconds
        super().__init__([("cnn", "train", {"batch": 128}),
                          ("tf", "train", {"batch": 128, "model": "transformer"})],
                         {"cnn": cnn, "tf": round(1 - cnn, 4)}, {"cnn": "cnn", "tf": "tf"})


class Deep(Shares):
    """n deep kernel streams (256 short kernels queued, then a sync) at the given shares;
    all run the same program, so one solo round serves them all."""

    def __init__(self, shares, args):
        names = [f"s{k}" for k in range(len(shares))]
        opts = {"batch": 256, "max_s": args.seconds}
        super().__init__([(x, "stream", opts) for x in names], dict(zip(names, shares)),
                         {x: "s0" for x in names})


class TrainInferUneq(Mix):
    """Training that leaves the GPU mostly idle beside two kinds of inference, at unequal
    shares 40/30/20 (docs/planner.md, "Measured: emitted plans applied"): judged by the
    work done against native's and the small-batch inference's tail."""
    metrics_order = ("aggregate_of_solo", "p99_ms", "p99_of_solo")

    def __init__(self, args):
        infer = {"gap_ms": 0.0, "eager": True, "requests": 200_000, "max_s": args.seconds,
                 "open_loop": False}
        super().__init__([("train", "train", {"batch": 8, "model": "transformer"}),
                          ("inf64", "infer", dict(infer, batch=64)),
                          ("inf8", "infer", dict(infer, batch=8))],
                         {"train": {"share": "40%"}, "inf64": {"share": "30%"},
                          "inf8": {"share": "20%"}},
                         [(f"solo-{n}", [n]) for n in ("train", "inf64", "inf8")])

    def metrics(self, figs, solo, config):
        parts = [ratio(figs[n].get("rate"), pick(solo, f"solo-{n}", n, "rate"))
                 for n in ("train", "inf64", "inf8")]
        p99 = figs["inf8"].get("p99_ms")
        return {"aggregate_of_solo": sum(parts) if all(map(real, parts)) else None,
                "p99_ms": p99, "p99_of_solo": ratio(p99, pick(solo, "solo-inf8", "inf8",
                                                              "p99_ms"))}


class Lend(Mix):
    """A busy tenant (ResNet-50 training) next to an idle one that stays alive (an
    inference process, warmed up, never asked for a request), shares 50/50: the busy one
    should have the whole GPU. Its native round is its solo (the idle one lives there
    too), as for a limit mix; metric aggregate_of_solo."""
    metrics_order = ("aggregate_of_solo",)

    def __init__(self, args):
        self.round_s = args.train_seconds
        idle = {"batch": 1, "gap_ms": 0, "eager": True, "requests": 1, "max_s": 1}
        super().__init__([("busy", "train", {"batch": 256}), ("idle", "infer", idle)],
                         {"busy": {"share": "50%"}, "idle": {"share": "50%"}}, [])

    def names(self):
        return ["busy"]

    def metrics(self, figs, solo, config):
        return {"aggregate_of_solo": ratio(figs["busy"].get("rate"),
                                           pick(solo, "native", "busy", "rate"))}


class Limit(Mix):
    """A lone kernel_stream of long kernels, under a limit in the Kairos configurations."""
    metrics_order = ("aggregate_of_solo", "share_err_pp")

    def __init__(self, limit, args):
        self.limit = limit
        opts = {"work": args.long_work, "batch": 8, "max_s": args.long_seconds}
        super().__init__([("capped", "stream", opts)],
                         {"capped": {"limit": f"{limit * 100:g}%"}}, [])

    def metrics(self, figs, solo, config):
        of_solo = ratio(figs["capped"].get("rate"), pick(solo, "native", "capped", "rate"))
        under_limit = of_solo is not None and config.startswith("kairos")
        return {"aggregate_of_solo": of_solo,
                "share_err_pp": abs(of_solo - self.limit) * 100 if under_limit else None}


def in_space(mix, domain, keep):
    """mix as a space mix: under Kairos all its tenants in fault domain `domain`, their
    policies cut to the keys in keep (no shares: the SMs are shared side by side)."""
    mix.domain = domain
    mix.policies = {n: {k: v for k, v in p.items() if k in keep}
                    for n, p in mix.policies.items()}
    return mix


def sms_from_shares(mix, caps=None):
    """A space mix of shares with each tenant's SMs capped at its share, or at caps (name
    -> percent) where given: under Kairos its `sms:` (the active thread percentage
    kairosd has the shim give the tenant's MPS clients), under MPS the same percentage
    by hand (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE): how near SM caps bring the work to the
    shares, and what they cost the mix's work."""
    for i, (name, kind, opts) in enumerate(mix.tenants):
        pct = (caps or {}).get(name, round(mix.targets[name] * 100))
        mix.tenants[i] = (name, kind, dict(opts, mps_threads=pct))
        mix.policies[name] = dict(mix.policies[name], sms=f"{pct}%")
    return mix


# name -> the mix, made from the arguments.
MIXES = {
    "infer2": lambda a: InferClosed(2, a),
    "infer4": lambda a: InferClosed(4, a),
    "infer8": lambda a: InferClosed(8, a),
    "infer4-tf": lambda a: InferClosed(4, a, model="transformer", batch=4),
    "infer4-open": lambda a: InferClosed(4, a, gap_ms=a.open_gap_ms),
    "infer8-open": lambda a: InferClosed(8, a, gap_ms=a.open_gap_ms * 2),
    "latency-train": LatencyTrain,
    "latency-train-open": lambda a: LatencyTrain(a, open_loop=True),
    "train-pair": TrainPair,
    "deep2": lambda a: Deep([0.5, 0.5], a),
    "deep4": lambda a: Deep([0.25] * 4, a),
    "deep8": lambda a: Deep([0.125] * 8, a),
    "deep4-uneq": lambda a: Deep([0.4, 0.3, 0.2, 0.1], a),
    "train-infer-uneq": TrainInferUneq,
    "lend": Lend,
    "limit-long": lambda a: Limit(0.30, a),
    "space-infer2": lambda a: in_space(InferClosed(2, a), "infer", ()),
    "space-infer4": lambda a: in_space(InferClosed(4, a), "infer", ()),
    "space-infer8": lambda a: in_space(InferClosed(8, a), "infer", ()),
    "space-latency-train": lambda a: in_space(LatencyTrain(a), "serve", ("priority",)),
    "space-pair": lambda a: in_space(TrainPair(a, cnn=0.75), "pair", ("share",)),
    "space-pair-sms": lambda a: sms_from_shares(in_space(TrainPair(a, cnn=0.75), "pair",
                                                         ("share",))),
    "space-pair-sms80": lambda a: sms_from_shares(in_space(TrainPair(a, cnn=0.75), "pair",
                                                           ("share",)), {"cnn": 80, "tf": 20}),
    "space-pair-sms85": lambda a: sms_from_shares(in_space(TrainPair(a, cnn=0.75), "pair",
                                                           ("share",)), {"cnn": 85, "tf": 15}),
}


# ---- one configuration's tenants -------------------------------------------------------

def write_file(path, text):
    """Puts text at path whole (a tenant polling for it never reads half of it)."""
    with open(path + ".new", "w") as f:
        f.write(text + "\n")
    os.rename(path + ".new", path)


class Tenant:
    """One tenant of one configuration: its folder, its process, its rounds."""
    slack_s = 0.3      # a round starts this long after it is handed out
    by_itself = True   # its rounds end by themselves (training's when told)

    def __init__(self, tset, name, kind, opts):
        self.set, self.name, self.kind, self.opts = tset, name, kind, opts
        self.dir = os.path.join(tset.dir, name)
        os.makedirs(self.dir)
        self.k = 0  # rounds begun
        self.proc = self.log = None
        self.placed = None
        self.earlier_pauses = 0  # the shim's pauses in logs of earlier processes
        self.earlier_sensor_ms = 0.0  # and its sensor's CPU time

    def spawn(self, cmd, log_name):
        if self.log:
            self.log.close()
            self.earlier_pauses += stats.shim_pauses(self.log_text())
            self.earlier_sensor_ms += stats.shim_sensor_ms(self.log_text())
        self.log = open(os.path.join(self.dir, log_name), "w")
        self.proc = subprocess.Popen(self.set.wrap(cmd, self.name), env=self.set.env(self),
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def exit_status(self):
        """The process's exit status; None while it runs (or before it started)."""
        return self.proc.poll() if self.proc else None

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def pauses(self):
        """How often the shim paused the tenant's processes (their exit reports)."""
        return self.earlier_pauses + stats.shim_pauses(self.log_text())

    def sensor_ms(self):
        """The CPU time of the shim's runnable sensor in the processes (their exit lines)."""
        return self.earlier_sensor_ms + stats.shim_sensor_ms(self.log_text())

    def log_text(self):
        try:
            with open(self.log.name) as f:
                return f.read()
        except (OSError, AttributeError):
            return ""

    def kill(self):
        if self.running():
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def placement(self):
        """Where the process runs once it runs the tenant's own program (`kairos run` has
        exec'd it) and the loader has mapped libc (the preloaded libraries come before it;
        right after an exec the kernel may not have laid out the environment yet):
        {"shim": libkairos mapped, "mps_pipe": CUDA_MPS_PIPE_DIRECTORY or None,
        "mps_priority": CUDA_MPS_CLIENT_PRIORITY or None, "mps_threads":
        CUDA_MPS_ACTIVE_THREAD_PERCENTAGE or None}; None once it is gone, or when it
        has not run its program 30 s after its start."""
        proc = f"/proc/{self.proc.pid}"
        kairos = os.path.realpath(self.set.bench.kairos)
        deadline = time.time() + 30  # kairos run asks kairosd first: slow on a loaded host
        try:
            while True:
                if self.proc.poll() is not None:
                    return None
                # exe first: once it names the program, the maps read after it are the
                # program's (maps read first may still be kairos's own, libc and no shim)
                exe = os.readlink(f"{proc}/exe")
                with open(f"{proc}/maps") as f:
                    maps = f.read()
                settled = exe != kairos and re.search(r"/libc[.-]", maps)
                if settled:
                    break
                if time.time() > deadline:
                    return None  # never ran its program: not "outside the shim"
                time.sleep(0.01)
            shim = "libkairos" in maps
            with open(f"{proc}/environ", "rb") as f:
                env = dict(w.split(b"=", 1) for w in f.read().split(b"\0") if b"=" in w)
        except OSError:
            return None
        pipe, prio, threads = (env.get(k) for k in (b"CUDA_MPS_PIPE_DIRECTORY",
                                                    b"CUDA_MPS_CLIENT_PRIORITY",
                                                    b"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"))
        return {"shim": shim, "mps_pipe": pipe and pipe.decode(),
                "mps_priority": prio and prio.decode(), "mps_threads": threads and threads.decode()}


class TorchTenant(Tenant):
    """A latency_tenant.py process alive for the whole mix (--rounds): round K begins when
    its go.K appears and has ended once NAME.K.done has."""

    def __init__(self, tset, name, kind, opts):
        super().__init__(tset, name, kind, opts)
        self.by_itself = kind == "infer"

    def command(self):
        a, o = self.set.bench.args, self.opts
        cmd = [a.python, os.path.join(HERE, "latency_tenant.py"), "--rounds", "--role", self.kind,
               "--dir", self.dir, "--name", self.name, "--batch", str(o["batch"]),
               "--max-s", "600", "--ready-timeout-s", "600", "--model",
               o.get("model", "resnet50")]
        if self.kind == "infer":
            cmd += ["--requests", str(o["requests"]), "--gap-ms", str(o["gap_ms"])]
            cmd += ["--eager"] if o.get("eager") else []
            cmd += ["--open-loop"] if o.get("open_loop") else []
        if a.dry_run:
            cmd.append("--dry-run")
            if self.set.first_infer is self:  # the failures the CPU test asks for
                cmd += [f"--dry-{how}" for how, config in (("fail", a.dry_fail),
                                                           ("hang", a.dry_hang))
                        if config == self.set.config]
        return cmd

    def start(self):
        self.spawn(self.command(), "tenant.log")

    def ready_info(self):
        try:
            with open(os.path.join(self.dir, f"{self.name}.ready")) as f:
                return dict(w.split("=", 1) for w in f.read().split() if "=" in w)
        except OSError:
            return None

    def begin(self, start, solo):
        """Hands out the next round; returns when it should be over, in seconds after the
        start (0: when it is told to stop)."""
        self.k += 1
        lead = SOLO_LEAD_S if solo else self.opts.get("lead_s", SOLO_LEAD_S)
        words = [f"{start:.6f}"]
        if self.kind == "infer":
            words += [f"lead_s={lead}", f"max_s={self.opts['max_s']}"]
        write_file(os.path.join(self.dir, f"go.{self.k}"), " ".join(words))
        return lead + self.opts["max_s"] if self.kind == "infer" else 0

    def stop(self):
        write_file(os.path.join(self.dir, f"stop.{self.k}"), "stop")

    def state(self):
        """done, running, or why it failed."""
        if os.path.exists(os.path.join(self.dir, f"{self.name}.{self.k}.done")):
            return "done"
        rc = self.exit_status()
        return "running" if rc is None else f"exited {rc}"

    def stamps(self):
        return stats.read_stamps(os.path.join(self.dir, f"{self.name}.{self.k}.stamps"))

    def cpu_use(self):
        """What the round cost the process on the CPU, from its done file: {cpu_ms_per_unit,
        stime_ms_per_unit, csw_per_unit, threads}; {} where the file says nothing of it."""
        try:
            with open(os.path.join(self.dir, f"{self.name}.{self.k}.done")) as f:
                said = dict(w.split("=", 1) for w in f.read().split() if "=" in w)
            units = int(said["units"])
            user, system = float(said["utime_s"]), float(said["stime_s"])
            switches = int(said["nvcsw"]) + int(said["nivcsw"])
        except (OSError, KeyError, ValueError):
            return {}
        if units <= 0:
            return {}
        return {"cpu_ms_per_unit": round((user + system) * 1000 / units, 4),
                "stime_ms_per_unit": round(system * 1000 / units, 4),
                "csw_per_unit": round(switches / units, 3), "threads": int(said["threads"])}

    def quit(self):
        write_file(os.path.join(self.dir, "quit"), "quit")


class StreamTenant(Tenant):
    """A kernel_stream process a round (it starts in ~1 s)."""

    def __init__(self, tset, name, kind, opts):
        super().__init__(tset, name, kind, opts)
        self.slack_s = tset.bench.args.stream_start_s

    def start(self):
        pass

    def ready_info(self):
        return {}

    def begin(self, start, solo):
        self.k += 1
        o = self.opts
        self.stamps_path = os.path.join(self.dir, f"{self.name}.{self.k}.stamps")
        work = ["--work", str(o["work"])] if "work" in o else []  # none: kernel_stream's own
        self.spawn(self.set.bench.stream_cmd + [
            "--seconds", str(o["max_s"]), "--alloc-mib", "64", "--batch", str(o["batch"]),
            *work, "--start-at", f"{start:.3f}", "--stamps", self.stamps_path],
            f"{self.name}.{self.k}.log")
        return o["max_s"]

    def state(self):
        rc = self.exit_status()
        return "running" if rc is None else "done" if rc == 0 else f"exited {rc}"

    def stamps(self):
        return stats.read_stamps(self.stamps_path)

    def quit(self):
        pass


class TenantSet:
    """One configuration's tenants of a mix and what they run under: nothing (native), a
    private MPS control daemon (mps) or a private kairosd with the mix's policies
    (kairos: kairosd's default time_mode; kairos-MODE: time_mode MODE)."""

    def __init__(self, bench, mix_name, mix, config):
        self.bench, self.mix_name, self.config = bench, mix_name, config
        self.work = os.path.join(bench.work, mix_name)
        self.dir = os.path.join(self.work, config)
        os.makedirs(self.dir)
        self.mps = self.daemon = self.domain = None  # domain: its tenants' fault domain
        self.failed = self.skipped = None
        self.tenants = {name: (StreamTenant if kind == "stream" else TorchTenant)(
            self, name, kind, opts) for name, kind, opts in mix.tenants}
        self.first_infer = next((t for t in self.tenants.values() if t.kind == "infer"), None)
        self.mix = mix

    def usable(self):
        return not (self.failed or self.skipped)

    def open(self):
        """Starts what the configuration runs under, then its tenants that last."""
        a = self.bench.args
        if self.config == "mps":
            control = shutil.which(a.mps_control)
            if not control:
                self.skipped = f"no {a.mps_control} on this machine"
                print(f"  {self.mix_name}/mps: skipped: {self.skipped}", flush=True)
                return
            self.mps = latency_bench.Mps(control, self.work)
            if not self.mps.start():
                self.mps = None
                self.skipped = "MPS did not start"
                return
        elif self.config == "shim-alone":  # no kairosd: an empty shim.conf
            os.makedirs(self.work, exist_ok=True)
            write_file(os.path.join(self.work, "shim-alone.conf"), "")
        elif self.config != "native":
            mode = CONFIG.match(self.config).group(1)
            quota = f"{max(4, 120 // len(self.tenants))}G"
            policies = ({n: {} for n in self.mix.policies} if mode == "memory"
                        else self.mix.policies)  # kairos-memory: quotas only
            self.domain = None if mode == "memory" else self.mix.domain
            lines = (["gpus: 1"] if a.dry_run else []) + self.space_lines()
            self.daemon = latency_bench.Daemon(self.work, self.config, policies,
                                               None if mode == "memory" else mode,
                                               lines, quota, self.domain)
            if not self.daemon.start(self.bench.kairosd, a.kairosd_arg):
                return self.fail(None, f"kairosd did not start (see {self.daemon.log_path})")
        for t in self.tenants.values():
            t.start()

    def quit_domains(self):
        """The MPS control daemons kairosd ran for the mix's domain, once kairosd is
        stopped: kairosd leaves them running for its next start to adopt, and this
        benchmark has no next start. kairosd --quit-domains asks each to quit and waits
        10 s (its lines go to kairosd's log); one still running after that (a client
        that never ended) is named and gets SIGTERM."""
        with open(self.daemon.log_path, "a") as log:
            r = subprocess.run([self.bench.kairosd, "-c", self.daemon.config,
                                "--quit-domains=10"], stdout=log, stderr=log, timeout=60)
        root = os.path.join(os.path.dirname(self.daemon.sock), "mps")
        for entry in sorted(os.listdir(root)) if r.returncode and os.path.isdir(root) else []:
            try:
                with open(os.path.join(root, entry, "control.pid")) as f:
                    pid = int(f.read())
                print(f"  {self.mix_name}: the control daemon of {entry} (pid {pid}) still "
                      "runs 10 s after quit: SIGTERM", flush=True)
                os.kill(pid, signal.SIGTERM)
            except (OSError, ValueError):
                continue

    def space_lines(self):
        """kairosd.yaml's space block where its tenants have a fault domain: the control
        daemon kairosd runs for it (a dry run: the stand-in; else --mps-control, where
        found, or none: kairosd's own default)."""
        if not self.domain:
            return []
        control = self.domain_control()
        return [f"space: {{ mps_control: {control} }}"] if control else []

    def domain_control(self):
        """The control daemon program of the mix's domain: the stand-in in a dry run, else
        --mps-control where found (None: not found, kairosd's own default)."""
        a = self.bench.args
        return SPACE_STAND_IN if a.dry_run else shutil.which(a.mps_control)

    def env(self, tenant):
        env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_MPS_")}
        if self.mps:
            env.update(self.mps.env)
            if "mps_priority" in tenant.opts:
                env["CUDA_MPS_CLIENT_PRIORITY"] = str(tenant.opts["mps_priority"])
            if "mps_threads" in tenant.opts:
                env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(tenant.opts["mps_threads"])
        if self.daemon:  # the shim says at exit how often it paused (in the log)
            env.update(KAIROS_SHIM_CONF=self.daemon.shim_conf, KAIROS_LOG="stderr")
        if self.config == "shim-alone":  # the shim on its own, as memory.sh's standalone
            env.update(LD_PRELOAD=" ".join(p for p in (env.get("LD_PRELOAD"),
                                                       os.environ.get("KAIROS_SHIM")) if p),
                       KAIROS_MEM="100G", KAIROS_LOG="stderr",
                       KAIROS_SHIM_CONF=os.path.join(self.work, "shim-alone.conf"))
        return env

    def wrap(self, cmd, name):
        return [self.bench.kairos, "run", "--tenant", name, "--"] + cmd if self.daemon else cmd

    def fail(self, tenant, why):
        """Fails the configuration for the rest of the mix: says why, kills its processes."""
        msg = f"{self.mix_name}/{self.config}" + (f"/{tenant.name}" if tenant else "") + f": {why}"
        self.bench.results["failures"].append(msg)
        print(f"  {msg}" + (f": {tenant.log_text().strip()[-400:]}" if tenant else ""), flush=True)
        self.failed = msg
        for t in self.tenants.values():
            t.kill()
        return False

    def check(self, tenant):
        """Fails the configuration unless the tenant runs where it says."""
        p = tenant.placement()
        if p is None:
            return self.fail(tenant, "gone, or not running its program 30 s after its start, "
                                     "before its placement could be read")
        tenant.placed = p
        pipe = self.mps.env["CUDA_MPS_PIPE_DIRECTORY"] if self.mps else None
        shimmed = bool(self.daemon) or self.config == "shim-alone"
        if p["shim"] != shimmed:
            return self.fail(tenant, f"{'outside' if shimmed else 'under'} the shim in "
                                     f"configuration {self.config}")
        if self.domain:  # the shim routes it to kairosd's MPS, whatever its environment
            return self.check_space(tenant)
        if p["mps_pipe"] != pipe:
            return self.fail(tenant, f"MPS pipe {p['mps_pipe']} in configuration {self.config}"
                                     f" (wanted {pipe})")
        return True

    def check_space(self, tenant):
        """Fails the configuration unless the shim said it routed the tenant's process to
        the mix's fault domain (its space line in the tenant's log, 10 s at most after
        the check began) and the domain's MPS server has it as a client; keeps what it
        said, and the server's clients, in the placement."""
        deadline = time.time() + 10
        while True:
            said = space_route(tenant.log_text(), tenant.proc.pid)
            if said or not tenant.running() or time.time() > deadline:
                break
            time.sleep(0.05)
        tenant.placed["space"] = said
        if not said:
            return self.fail(tenant, f"no 'space: fault domain' line of pid {tenant.proc.pid}"
                                     f" in its log in configuration {self.config}")
        if said["domain"] != self.domain:
            return self.fail(tenant, f"fault domain {said['domain']} in configuration "
                                     f"{self.config} (wanted {self.domain})")
        want = tenant.opts.get("mps_threads")
        if want is not None and said["percentage"] != str(want):
            return self.fail(tenant, f"active thread percentage {said['percentage']} in "
                                     f"configuration {self.config} (wanted {want}, its sms:)")
        return self.check_client(tenant, said["pipe"])

    def check_client(self, tenant, pipe):
        """Fails the configuration unless the domain's control daemon names the tenant's
        process among its server's clients (10 s at most): the shim's word is not
        proof that libcuda took the route (it must ask getenv for the pipe)."""
        control = self.domain_control() or "nvidia-cuda-mps-control"
        deadline = time.time() + 10
        while True:
            clients = mps_clients(control, pipe)
            if tenant.proc.pid in clients or time.time() > deadline:
                break
            time.sleep(0.2)
        tenant.placed["mps_clients"] = sorted(clients)
        if tenant.proc.pid not in clients:
            return self.fail(tenant, f"pid {tenant.proc.pid} is no client of the MPS server "
                                     f"of fault domain {self.domain} (pipe {pipe}; its clients:"
                                     f" {sorted(clients) or 'none'}) in configuration "
                                     f"{self.config}")
        return True

    def wait_ready(self, deadline):
        """Waits for the lasting tenants' ready files, then checks where each runs."""
        waiting = [t for t in self.tenants.values() if isinstance(t, TorchTenant)]
        while self.usable() and waiting:
            for t in list(waiting):
                if not self.usable():  # one failed it: the others were killed, not failing
                    break
                if t.ready_info() is not None:
                    waiting.remove(t)
                    self.check(t)
                elif t.exit_status() is not None:
                    self.fail(t, f"exited {t.exit_status()} before it was ready")
            if waiting and time.time() > deadline:
                self.fail(waiting[0], "not ready in time (--ready-timeout-s)")
            time.sleep(0.02)

    def wait_done(self, tenants, deadline, what):
        """Waits for tenants' rounds to end; fails the configuration on an exit or a hang."""
        pending = list(tenants)
        while pending:
            states = {t: t.state() for t in pending}
            pending = [t for t, s in states.items() if s != "done"]
            broken = next((t for t in pending if states[t] != "running"), None)
            if broken:
                return self.fail(broken, f"{states[broken]} in {what}")
            if pending and time.time() > deadline:
                return self.fail(pending[0], f"not done {self.bench.args.round_grace_s:g} s "
                                             f"after {what} should have ended (hung? killed)")
            time.sleep(0.02)
        return True

    def round(self, names, label, rep):
        """One round of the named tenants together from a common start: their figures
        {name: figures}, or None where the configuration failed."""
        a = self.bench.args
        what = f"round {label} of repetition {rep}"
        tenants = [self.tenants[n] for n in names]
        start = time.time() + max(t.slack_s for t in tenants)
        length = max([t.begin(start, label.startswith("solo")) for t in tenants])
        for t in tenants:
            if isinstance(t, StreamTenant) and not self.check(t):
                return None
        drivers = [t for t in tenants if t.by_itself]
        if drivers:
            ok = self.wait_done(drivers, start + length + a.round_grace_s, what)
        else:  # training only: as long as the mix says, or --train-solo-s
            time.sleep(max(0.0, start + (self.mix.round_s or a.train_solo_s) - time.time()))
            ok = True
        others = [t for t in tenants if not t.by_itself]
        for t in others if ok else []:
            t.stop()
        if not (ok and self.wait_done(others, time.time() + a.round_grace_s, what)):
            return None
        if self.mps:  # the clients did reach the server MPS started for them
            servers = self.mps.ask("get_server_list")
            if not servers or servers.startswith("error"):
                self.fail(None, f"no MPS server after {what} ({servers!r})")
                return None
        return self.figures(tenants, start, what)

    def figures(self, tenants, start, what):
        figs = {t.name: request_figures(t.stamps()) for t in tenants if t.kind == "infer"}
        spans = [f["span_ns"] for f in figs.values() if "span_ns" in f]
        span = (min(s[0] for s in spans), max(s[1] for s in spans)) if spans else None
        if span is None:  # training only: the time every one of them was stepping
            span = common_span([t.stamps() for t in tenants if t.kind == "train"])
        for t in tenants:
            if t.kind == "infer" and isinstance(t, TorchTenant):
                figs[t.name].update(t.cpu_use())  # where a difference comes from, not judged
            if t.kind == "train":
                figs[t.name] = step_figures(t.stamps(), span)
            elif t.kind == "stream":
                figs[t.name] = kernel_figures(t.stamps(), int(start * 1e9), t.opts["max_s"])
        few = next((t for t in tenants if figs[t.name]["units"] < 2), None)
        if few:
            self.fail(few, f"{figs[few.name]['units']} unit(s) of work in {what}")
            return None
        return figs

    def close(self):
        """Ends the lasting tenants (quit, then killed after 30 s), then kairosd or MPS;
        returns what the results keep of the configuration: skipped or failed and why,
        where each tenant ran and, under Kairos, how often the shim paused it."""
        for t in self.tenants.values():
            t.quit()
        deadline = time.time() + 30
        for t in self.tenants.values():
            while t.running() and time.time() < deadline:
                time.sleep(0.05)
            rc = t.exit_status()
            t.kill()
            if rc and self.usable():  # its rounds stand; the exit is a failure all the same
                self.bench.results["failures"].append(
                    f"{self.mix_name}/{self.config}/{t.name}: exited {rc} after its rounds")
            if t.log:
                t.log.close()
        if self.daemon:
            self.daemon.stop()
            self.quit_domains()
        if self.mps:
            self.mps.stop()
        return {"skipped": self.skipped, "failed": self.failed,
                "placement": {t.name: t.placed for t in self.tenants.values()},
                "pauses": {t.name: t.pauses() for t in self.tenants.values()} if self.daemon
                else None,
                "sensor_ms": {t.name: round(t.sensor_ms(), 1) for t in self.tenants.values()}
                if self.daemon else None}


# the line the shim of a space tenant's process logs (KAIROS_LOG=stderr) once it routes it
SPACE_LINE = re.compile(r"^kairos\[(\d+)\]: space: fault domain (\S+), MPS pipe (.*), "
                        r"active thread percentage (\S+), priority (\S+)$", re.M)


def mps_clients(control, pipe):
    """The pids an MPS control daemon (its pipe folder) names as its servers' clients
    (get_server_list, then get_client_list of each); an empty set where it answers
    nothing."""
    env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=pipe)

    def ask(question):
        try:
            return subprocess.run([control], input=question + "\n", capture_output=True,
                                  text=True, env=env, timeout=10).stdout
        except (OSError, subprocess.TimeoutExpired):
            return ""
    return {int(p) for server in ask("get_server_list").split() if server.isdigit()
            for p in ask(f"get_client_list {server}").split() if p.isdigit()}


def space_route(log, pid):
    """What the shim said of process pid's routing in a log ({"domain", "pipe",
    "percentage", "priority"}, its last such line), or None where it said nothing."""
    said = [m for m in SPACE_LINE.finditer(log) if int(m.group(1)) == pid]
    if not said:
        return None
    return dict(zip(("domain", "pipe", "percentage", "priority"), said[-1].groups()[1:]))


# ---- the benchmark ---------------------------------------------------------------------

def rotated(items, k):
    """items turned left by k (mod their number): a repetition's order of configurations."""
    k = k % len(items) if items else 0
    return list(items[k:]) + list(items[:k])


def medians(per_rep, order):
    """{metric: the median of its values over the repetitions, None where none has one}."""
    out = {}
    for m in order:
        vals = [r[m] for r in per_rep if real(r.get(m))]
        out[m] = statistics.median(vals) if vals else None
    return out


def gpu_info():
    """(GPU name, driver version) as nvidia-smi gives them; unknown without one."""
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                            "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
        name, driver = (x.strip() for x in r.stdout.splitlines()[0].split(","))
        return name, driver
    except (OSError, subprocess.SubprocessError, IndexError, ValueError):
        return "unknown", "unknown"


class Bench:
    def __init__(self, args):
        self.args = args
        self.kairos = args.kairos or os.path.join(args.bin, "kairos")
        self.kairosd = args.kairosd or os.path.join(args.bin, "kairosd")
        self.stream_cmd = ([args.python, os.path.join(HERE, "dry_stream.py")] if args.dry_run
                           else [args.stream or os.path.join(args.bin, "kernel_stream")])
        self.work = os.path.join(args.out, "harm")
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work)
        self.configs = args.configs.split(",")
        self.seq = 0
        gpu, driver = gpu_info()
        self.results = {
            "gpu": gpu, "driver": driver, "torch": None, "date": time.strftime("%Y-%m-%d",
                                                                               time.gmtime()),
            "started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
            "dry_run": args.dry_run, "configs": self.configs, "reps": args.reps,
            "seconds": args.seconds, "requests": args.requests, "lead_s": args.lead_s,
            "long_seconds": args.long_seconds, "long_work": args.long_work,
            "goals": {"aggregate_floor": AGG_FLOOR, "p99_ceiling": P99_CEIL,
                      "limit_tolerance": LIMIT_TOL, "share_tolerance_pp": SHARE_TOL_PP,
                      "space_aggregate_floor": SPACE_AGG_FLOOR,
                      "space_share_tolerance_pp": SPACE_SHARE_TOL_PP},
            "mixes": {}, "failures": []}

    def run_mix(self, name):
        """Every configuration's tenants started together, then the repetitions, each
        its solo rounds and every configuration's round in turn; then the medians."""
        mix = MIXES[name](self.args)
        rec = self.results["mixes"][name] = {
            "tenants": mix.tenants, "policies": mix.policies, "limit": mix.limit,
            "domain": mix.domain,
            "metrics_order": list(mix.metrics_order), "rounds": [], "metrics": {},
            "medians": {}, "sets": {}}
        t0 = time.time()
        sets = {c: TenantSet(self, name, mix, c) for c in self.configs}
        try:
            for s in sets.values():
                s.open()
            deadline = time.time() + self.args.ready_timeout_s
            for s in sets.values():
                s.wait_ready(deadline)
            self.check_alike(sets)
            self.note_torch(sets["native"])
            print(f"  {name}: tenants ready in {time.time() - t0:.0f} s", flush=True)
            for rep in range(1, self.args.reps + 1):
                for label, names in mix.solo:
                    self.round(rec, sets["native"], names, label, rep)
                for c in rotated(self.configs, rep - 1):
                    self.round(rec, sets[c], mix.names(), c, rep)
        finally:
            for c, s in sets.items():
                rec["sets"][c] = s.close()
        self.summarise(mix, sets, rec)
        rec["seconds"] = time.time() - t0

    @staticmethod
    def check_alike(sets):
        """Fails a configuration whose requests are not native's: a CUDA graph captured in
        one of them and not in the other."""
        native = sets["native"]
        for s in sets.values():
            for name, t in s.tenants.items():
                if t.kind != "infer" or not (s.usable() and native.usable()):
                    continue
                mine, want = ((x.ready_info() or {}).get("graphs")
                              for x in (t, native.tenants[name]))
                if mine != want:
                    s.fail(t, f"graphs={mine} where native had {want} (CUDA graph capture "
                              "failed in one of them)")

    def note_torch(self, tset):
        for t in tset.tenants.values():
            self.results["torch"] = self.results["torch"] or (t.ready_info() or {}).get("torch")

    def round(self, rec, tset, names, label, rep):
        if not tset.usable():
            return
        self.seq += 1
        started = time.time()
        figs = tset.round(names, label, rep)
        rec["rounds"].append({"seq": self.seq, "rep": rep, "round": label,
                              "config": tset.config, "started": started, "figures": figs})
        if figs:
            print(f"  {tset.mix_name} rep {rep} {label:15s} " + "  ".join(
                f"{n} {f['rate']:.4g}/s" + (f" p99 {f['p99_ms']:.2f} ms" if "p99_ms" in f else "")
                for n, f in figs.items()), flush=True)

    def summarise(self, mix, sets, rec):
        """Each configuration's metrics per repetition against that repetition's solo,
        and their medians (None for a configuration that failed or was skipped)."""
        by = {(r["rep"], r["round"]): r["figures"] for r in rec["rounds"] if r["figures"]}
        for c in self.configs:
            per_rep = []
            for rep in range(1, self.args.reps + 1):
                if (rep, c) not in by:
                    continue
                solo = {label: by.get((rep, label), {}) for label, _ in mix.solo} if mix.solo \
                    else {"native": by.get((rep, "native"), {})}
                per_rep.append(mix.metrics(by[(rep, c)], solo, c))
            rec["metrics"][c] = per_rep
            rec["medians"][c] = medians(per_rep, mix.metrics_order) if sets[c].usable() else None


# ---- what it writes --------------------------------------------------------------------

def cell(medians_of_config, metric):
    v = (medians_of_config or {}).get(metric)
    return format(v, FORMATS.get(metric, ".4g")) if real(v) else "-"


def tsv_rows(r):
    """harm.tsv: the header, then a line a mix and metric: native, mps, kairos medians."""
    rows = [["mix", "metric", *TSV_CONFIGS]]
    for name, rec in r["mixes"].items():
        for metric in rec["metrics_order"]:
            rows.append([name, metric] + [cell(rec["medians"].get(c), metric)
                                          for c in TSV_CONFIGS])
    return rows


def goals(rec):
    """(the column a mix is judged against, its aggregate floor, its share tolerance in
    points): a space mix against MPS at its best, the others against native."""
    if rec.get("domain"):
        return "mps", SPACE_AGG_FLOOR, SPACE_SHARE_TOL_PP
    return "native", AGG_FLOOR, SHARE_TOL_PP


def verdict(rec, metric, base, kairos):
    """ok, or HARM (below the base's aggregate, above its p99: native's, a space mix's
    MPS's) or MISSED (a limit, a share), or n/a; empty for the metrics without a goal."""
    limit = rec.get("limit")
    _, floor, share_tol = goals(rec)
    if limit is None and metric == "share_err_pp":  # target shares: Kairos's own figure
        goal, bad, x = (lambda k: k <= share_tol + 1e-9), "MISSED", kairos
    elif limit is not None:
        goal = {"aggregate_of_solo": lambda k: abs(k - limit) <= LIMIT_TOL + 1e-9,
                "share_err_pp": lambda k: k <= LIMIT_TOL * 100 + 1e-9}.get(metric)
        bad, x = "MISSED", kairos
    else:
        goal = {"aggregate_rps": lambda q: q >= floor, "aggregate_of_solo":
                lambda q: q >= floor, "p99_ms": lambda q: q <= P99_CEIL}.get(metric)
        bad, x = "HARM", ratio(kairos, base)
    if goal is None:
        return ""
    return "n/a" if not real(x) else "ok" if goal(x) else bad


def table(r):
    """The table printed last: medians, kairos/native, kairos/mps and the verdict against
    the goals (a space mix's against MPS)."""
    extra = [c for c in r["configs"] if c not in TSV_CONFIGS]
    cols = [*TSV_CONFIGS, *extra]
    least = "at least " if r.get("parts") else ""
    lines = [f"=== do no harm: medians of {least}{r['reps']} interleaved repetitions; "
             f"{r['gpu']}, driver {r['driver']}, torch {r['torch']}, {r['started_utc']} UTC"
             + ("; DRY RUN (no GPU)" if r["dry_run"] else "")]
    lines += [f"run {i}: {p['started_utc']} UTC, {p['reps']} repetitions of "
              f"{','.join(p['configs'])}; its mixes: "
              + ",".join(n for n, rec in r["mixes"].items() if rec.get("run") == i)
              for i, p in enumerate(r.get("parts", []), 1)]
    lines += [f"goals: without a limit, kairos aggregate >= {AGG_FLOOR}x native and p99 <= "
              f"{P99_CEIL}x native, shares within {SHARE_TOL_PP:g} pp; a limit mix within "
              f"+-{LIMIT_TOL} of its limit; space- mixes: aggregate >= {SPACE_AGG_FLOOR}x mps, "
              f"p99 <= {P99_CEIL}x mps, shares within {SPACE_SHARE_TOL_PP:g} pp",
              f"{'mix':19s} {'metric':18s}" + "".join(f" {c:>10s}" for c in cols)
              + f" {'kairos/nat':>10s} {'kairos/mps':>10s} verdict"]
    for name, rec in r["mixes"].items():
        for metric in rec["metrics_order"]:
            med = {c: (rec["medians"].get(c) or {}).get(metric) for c in cols}
            qs = [ratio(med["kairos"], med[c]) for c in ("native", "mps")]
            lines.append(f"{name:19s} {metric:18s}" + "".join(
                f" {cell(rec['medians'].get(c), metric):>10s}" for c in cols)
                + "".join(f" {format(q, '.3f') if q is not None else '-':>10s}" for q in qs)
                + " " + verdict(rec, metric, med[goals(rec)[0]], med["kairos"]))
        for c, x in rec["sets"].items():
            if x["skipped"]:
                lines.append(f"{name:19s} {c} skipped: {x['skipped']}")
    fails = r["failures"]
    lines.append(f"failures (their columns read -): {len(fails)}"
                 + "".join(f"\n  {f}" for f in fails))
    return "\n".join(lines)


def write_summary(b):
    """harm-results.json and harm.tsv as they stand: written after every mix, so that a
    run cut short (the device time spent, a call's limit) keeps the mixes it finished."""
    out = b.args.out
    for name, write in (("harm-results.json", lambda f: json.dump(b.results, f, indent=1)),
                        ("harm.tsv", lambda f: f.writelines(
                            "\t".join(row) + "\n" for row in tsv_rows(b.results)))):
        with open(os.path.join(out, name + ".new"), "w") as f:
            write(f)
        os.replace(os.path.join(out, name + ".new"), os.path.join(out, name))


def write_outputs(b):
    out = b.args.out
    write_summary(b)
    subprocess.run(["tar", "czf", os.path.join(out, "harm-runs.tar.gz"), "-C", out,
                    "--exclude=*.sock", "--exclude=harm/*/mps/pipe", "harm"], check=False)
    shutil.rmtree(b.work, ignore_errors=True)


def merge_results(parts):
    """One result from runs of the same GPU and driver that measured different mixes (a
    call's time limit fits only some mixes): each mix keeps the run, and so the interleaved
    rounds, it was measured in; the header lists the runs. Raises ValueError where the runs
    cannot be one result."""
    first = parts[0]
    for p in parts[1:]:
        if (p["gpu"], p["driver"], p["dry_run"]) != (first["gpu"], first["driver"],
                                                     first["dry_run"]):
            raise ValueError(f"runs on {first['gpu']} driver {first['driver']} and on "
                             f"{p['gpu']} driver {p['driver']} cannot be one result: "
                             "save them separately")
    merged = dict(first, mixes={}, failures=[], parts=[])
    merged["configs"] = []
    for i, p in enumerate(parts, 1):
        merged["parts"].append({k: p[k] for k in ("started_utc", "configs", "reps", "torch")})
        merged["configs"] += [c for c in p["configs"] if c not in merged["configs"]]
        merged["torch"] = merged["torch"] or p["torch"]
        merged["failures"] += p["failures"]
        for name, rec in p["mixes"].items():
            if name in merged["mixes"]:
                raise ValueError(f"mix {name} is in two of the runs: save the one to keep")
            merged["mixes"][name] = dict(rec, run=i)
    merged["reps"] = min(p["reps"] for p in parts)
    return merged


def recompress(gz_path, xz_path):
    """The runs' archive as xz: half of gzip's size for these logs and stamps (10.0 -> 5.1
    MB on 2026-12-05-harm-4's), which the repository keeps."""
    with gzip.open(gz_path, "rb") as src, lzma.open(xz_path + ".new", "wb", preset=6) as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    os.rename(xz_path + ".new", xz_path)


def save(srcs, root):
    """Copies what came back from the GPU machine (srcs: one folder, or several whose runs
    measured different mixes on the same GPU) into root/DATE-harm (-2, -3... where taken)
    with a README.md that holds the table, the runs' archives as xz; returns that
    folder."""
    parts = []
    for src in srcs:
        with open(os.path.join(src, "harm-results.json")) as f:
            parts.append(json.load(f))
    r = parts[0] if len(parts) == 1 else merge_results(parts)
    dest = os.path.join(root, f"{r['date']}-harm")
    n = 1
    while os.path.exists(dest):
        n += 1
        dest = os.path.join(root, f"{r['date']}-harm-{n}")
    os.makedirs(dest)
    with open(os.path.join(dest, "harm-results.json"), "w") as f:
        json.dump(r, f, indent=1)
    with open(os.path.join(dest, "harm.tsv"), "w") as f:
        f.writelines("\t".join(row) + "\n" for row in tsv_rows(r))
    for i, src in enumerate(srcs, 1):
        tag = "" if len(srcs) == 1 else f"-{i}"
        if os.path.exists(os.path.join(src, "harm-runs.tar.gz")):
            recompress(os.path.join(src, "harm-runs.tar.gz"),
                       os.path.join(dest, f"harm-runs{tag}.tar.xz"))
        if os.path.exists(os.path.join(src, "suite.log")):
            shutil.copy(os.path.join(src, "suite.log"), os.path.join(dest, f"harm-suite{tag}.txt"))
    with open(os.path.join(dest, "README.md"), "w") as f:
        f.write(f"# Do no harm ({r['date']}, {r['gpu']}, driver {r['driver']})\n\n"
                "`scripts/gpu-suite harm` (tests/gpu/harm_bench.py; docs/scheduler.md, \"The "
                "harm benchmark\"). harm.tsv: the medians; harm-results.json: every round.\n\n"
                f"```\n{table(r)}\n```\n")
    return dest


# the numeric options: (option, type, default, the environment variable that sets it, help)
NUMBERS = [
    ("--reps", int, 3, "HARM_REPS", "repetitions of every configuration"),
    ("--seconds", float, 6.0, "HARM_SECONDS", "a closed-loop round's length"),
    ("--requests", int, 800, "HARM_REQUESTS", "latency-train: requests a round"),
    ("--max-s", float, 30.0, None, "latency-train: the most a round's requests may take"),
    ("--lead-s", float, 2.0, None, "latency-train: training alone before the first request"),
    ("--train-solo-s", float, 4.0, None, "latency-train: the training's solo round"),
    ("--long-seconds", float, 8.0, "HARM_LONG_SECONDS", "limit-long: a run's length"),
    ("--train-seconds", float, 8.0, "HARM_TRAIN_SECONDS", "train-pair, lend: a round's length"),
    ("--open-gap-ms", float, 16.0, "HARM_OPEN_GAP_MS",
     "infer4-open: mean gap between a process's arrivals (infer8-open: twice it)"),
    ("--long-work", int, LONG_WORK, "HARM_LONG_WORK", "limit-long: FMAs a thread a kernel"),
    ("--stream-start-s", float, 1.5, None, "kernel_stream: time to make its context"),
    ("--ready-timeout-s", float, 120.0, None, "the most a mix's tenants may take to be ready"),
    ("--round-grace-s", float, 30.0, None, "how late a round may end before it counts as hung"),
]


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--save", metavar="DIR[,DIR...]",
                    help="copy DIR's results into bench/results (several: runs of different "
                         "mixes on one GPU, saved as one result)")
    ap.add_argument("--results-root", default=os.path.join(HERE, "..", "..", "bench", "results"))
    ap.add_argument("--bin", help="kairos and kairosd live here")
    ap.add_argument("--kairos", help="kairos elsewhere than in --bin")
    ap.add_argument("--kairosd", help="kairosd elsewhere than in --bin")
    ap.add_argument("--stream", help="kernel_stream (default: --bin's)")
    ap.add_argument("--out")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--mixes", default=os.environ.get("HARM_MIXES") or QUICK,
                    help=f"of {','.join(MIXES)}, or a group: {', '.join(GROUPS)} "
                         "(env HARM_MIXES)")
    ap.add_argument("--configs", default=os.environ.get("HARM_CONFIGS") or "native,mps,kairos",
                    help="native,mps,kairos,kairos-windows|timeslices|auto|memory "
                         "(env HARM_CONFIGS)")
    for opt, kind, default, knob, text in NUMBERS:
        ap.add_argument(opt, type=kind, help=text + (f" (env {knob})" if knob else ""),
                        default=latency_bench.env_default(knob, default, kind) if knob else default)
    ap.add_argument("--mps-control", default="nvidia-cuda-mps-control")
    ap.add_argument("--kairosd-arg", action="append", default=[])
    ap.add_argument("--dry-run", action="store_true", help="no torch, no GPU (CPU test)")
    ap.add_argument("--dry-fail", default="", metavar="CONFIG",
                    help="dry run: CONFIG's first inference tenant fails half way")
    ap.add_argument("--dry-hang", default="", metavar="CONFIG",
                    help="dry run: CONFIG's first inference tenant hangs half way")
    args = ap.parse_args(argv)
    if args.save:
        return args
    if not (args.bin and args.out):
        ap.error("--bin and --out are needed (or --save DIR)")
    args.mixes = ",".join(GROUPS.get(m, m) for m in args.mixes.split(","))
    configs = args.configs.split(",")
    bad = [c for c in configs if not CONFIG.match(c)] + [m for m in args.mixes.split(",")
                                                         if m not in MIXES]
    if bad or "native" not in configs or len(set(configs)) != len(configs):
        ap.error(f"--configs {args.configs} --mixes {args.mixes}: unknown {','.join(bad) or '-'};"
                 " configurations: native (needed: the baseline of every ratio), mps, kairos, "
                 "kairos-windows, kairos-timeslices, kairos-auto, kairos-memory, shim-alone; "
                 "mixes: "
                 f"{','.join(MIXES)}")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.save:
        try:
            print(save(args.save.split(","), args.results_root))
        except (OSError, ValueError) as e:
            print(f"harm_bench.py --save: {e}", file=sys.stderr)
            return 1
        return 0
    sys.stdout.reconfigure(line_buffering=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # MPS quit, tenants killed
    os.makedirs(args.out, exist_ok=True)
    b = Bench(args)
    t0 = time.time()
    print(f"--- harm: {args.mixes} in {args.configs}, {args.reps} interleaved repetitions")
    try:
        for name in args.mixes.split(","):
            try:
                b.run_mix(name)
            except Exception:  # the rest still runs and is written
                b.results["failures"].append(f"{name}: the benchmark broke: "
                                             + traceback.format_exc().strip().splitlines()[-1])
                traceback.print_exc()
            write_summary(b)
    finally:
        b.results["seconds"] = time.time() - t0
        write_outputs(b)
    print(table(b.results))
    return 1 if b.results["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
