#!/usr/bin/env python3
"""trims_simulated.py - the simulation behind this folder's README: the controller of
src/daemon/time/slice_trim.c as of commit cf7f782 ("old") and the variants tried on
2026-12-07, on four deep streams at 40/30/20/10 whose slices (8192/6144/4096/2048 us,
trimmed in steps of 1/32) each overrun by 0.9 ms a turn, read with a 4-point scatter a
period, in 3 rounds of 60 periods (the median round; trims kept between rounds as
recall_level keeps them, or not: "fresh"), median and 90th percentile over 30 seeds;
and eight equal tenants on a 2.5-point scatter alone for 3000 periods (how far their
trims wander: the controller's own constants keep them at 1 in the unit test's noise).
Not a test: a record of how the figures were made. Usage: python3 trims_simulated.py
"""
import math
import random
import statistics

ERR_GAIN, TRIM_GAIN, DEADBAND, VAR_GAIN, WANT_MIN = 0.1, 0.3, 0.005, 0.05, 0.05


class Trim:
    def __init__(self):
        self.trim, self.err, self.slow, self.var, self.n, self.engaged = 1.0, 0, 0, 0, 0, False


def observe(s, want, got, v):
    gap = want - got
    off = gap - s.err
    s.var += VAR_GAIN * (off * off - s.var)
    s.err += ERR_GAIN * off
    s.n += 1
    gain = max(v["slow_gain"], 1.0 / s.n) if v["plain_mean_first"] else v["slow_gain"]
    s.slow += gain * (gap - s.slow)
    sd_err = math.sqrt(s.var * ERR_GAIN / (2 - ERR_GAIN))
    sd_slow = math.sqrt(s.var * gain / (2 - gain))
    if gain > v["slow_gain"]:
        sd_slow = math.sqrt(s.var / s.n)  # a plain mean of n periods
    clears = abs(s.slow) > max(DEADBAND, v["sds"] * sd_slow)
    g, k = 0.0, 1.0
    if abs(s.err) > max(DEADBAND, 4 * sd_err):
        g = s.err
    elif v["follow_down"]:
        s.engaged = clears or (s.engaged and abs(s.slow) >= sd_slow)
        g, k = (s.slow, v["slow_step"]) if s.engaged else (0.0, 1.0)
    elif clears:
        g = s.slow
    s.trim = min(2, max(0.5, s.trim * math.exp(k * TRIM_GAIN * g / max(want, WANT_MIN))))


def normalize(trims):
    scale = math.exp(-sum(math.log(t.trim) for t in trims) / len(trims))
    for t in trims:
        t.trim = min(2, max(0.5, t.trim * scale))


def deep4(v, seed, recall, overrun_us=900, rounds=3, periods=60, scatter=0.04):
    rnd = random.Random(seed)
    slices, want = [8192, 6144, 4096, 2048], [0.4, 0.3, 0.2, 0.1]
    trims, errs = [Trim() for _ in slices], []
    for _ in range(rounds):
        if not recall:
            trims = [Trim() for _ in slices]
        ran = [0.0] * 4
        for _ in range(periods):
            turn = [round(t.trim * 32) / 32 * s + overrun_us for t, s in zip(trims, slices)]
            part = [x / sum(turn) for x in turn]
            for t, w, p in zip(trims, want, part):
                observe(t, w, p + rnd.gauss(0, scatter), v)
            normalize(trims)
            ran = [a + p for a, p in zip(ran, part)]
        errs.append(max(abs(a / periods - w) for a, w in zip(ran, want)) * 100)
    return statistics.median(errs)


def wander(v, seed, periods=3000, scatter=0.025):
    rnd = random.Random(seed)
    trims, lo, hi = [Trim() for _ in range(8)], 1.0, 1.0
    for _ in range(periods):
        for t in trims:
            observe(t, 0.125, 0.125 + rnd.gauss(0, scatter), v)
        normalize(trims)
        for t in trims:
            step = round(t.trim * 32) / 32
            lo, hi = min(lo, step), max(hi, step)
    return lo, hi


OLD = dict(slow_gain=0.02, plain_mean_first=False, sds=4, follow_down=False, slow_step=1)
VARIANTS = {
    "old": OLD,
    "plain mean first": dict(OLD, plain_mean_first=True),
    "plain mean first, 3 sds": dict(OLD, plain_mean_first=True, sds=3),
    "plain mean first, followed down": dict(OLD, plain_mean_first=True, follow_down=True),
    "plain mean first, 3 sds, followed down": dict(OLD, plain_mean_first=True, sds=3,
                                                   follow_down=True),
    "the same, half steps": dict(OLD, plain_mean_first=True, sds=3, follow_down=True,
                                 slow_step=0.5),
}

if __name__ == "__main__":
    print(f"{'variant':40s} {'deep4 recall med/p90':>22s} {'deep4 fresh med/p90':>21s}"
          f" {'8 equal: trims within':>22s}")
    for name, v in VARIANTS.items():
        cols = []
        for recall in (True, False):
            m = sorted(deep4(v, s, recall) for s in range(30))
            cols.append(f"{statistics.median(m):.2f}/{m[26]:.2f}")
        w = [wander(v, s) for s in range(5)]
        print(f"{name:40s} {cols[0]:>22s} {cols[1]:>21s}"
              f" {min(x[0] for x in w):>10.3f}-{max(x[1] for x in w):.3f}")
