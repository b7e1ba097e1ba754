"""latency_stats - the arithmetic of the latency benchmark (tests/gpu/latency_bench.py),
kept apart so that tests/system/test_latency_bench.py checks it without a GPU: the
seeded request schedule (exponential idle gaps), percentiles, the bootstrap interval
of a p99 ratio, a rate from step end stamps, and the reading of the tenants' stamp
files and of the shim's pause report. numpy when the machine has it (the bootstrap is then vectorised), pure Python
otherwise; both give the same percentiles (linear interpolation, numpy's default)."""
import math
import random
import re

try:
    import numpy
except ImportError:  # pure Python below
    numpy = None


def request_gaps(n, mean_ms, seed):
    """The idle gap (ms) after each of n requests: exponential of mean mean_ms, the
    same sequence for the same seed in every configuration (paired comparison)."""
    rng = random.Random(seed)
    return [rng.expovariate(1.0 / mean_ms) if mean_ms > 0 else 0.0 for _ in range(n)]


def percentile(values, q):
    """The q-quantile (0..1) of values by linear interpolation between closest ranks;
    nan when there are none."""
    if not values:
        return float("nan")
    v = sorted(values)
    pos = q * (len(v) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def bootstrap_ratio_ci(solo, other, q=0.99, resamples=2000, seed=7, level=0.95):
    """(low, high): the level interval of quantile_q(other) / quantile_q(solo), both
    samples resampled with replacement independently, resamples times."""
    if len(solo) < 2 or len(other) < 2:
        return float("nan"), float("nan")
    tail = (1.0 - level) / 2
    if numpy is not None:
        rng = numpy.random.default_rng(seed)
        ratios = numpy.empty(resamples)
        a, b = numpy.asarray(solo, dtype=float), numpy.asarray(other, dtype=float)
        step = max(1, 4_000_000 // max(len(a), len(b)))  # bounded memory per chunk
        for i in range(0, resamples, step):
            k = min(step, resamples - i)
            qa = numpy.quantile(a[rng.integers(0, len(a), (k, len(a)))], q, axis=1)
            qb = numpy.quantile(b[rng.integers(0, len(b), (k, len(b)))], q, axis=1)
            ratios[i:i + k] = qb / qa
        return float(numpy.quantile(ratios, tail)), float(numpy.quantile(ratios, 1 - tail))
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        qa = percentile([solo[rng.randrange(len(solo))] for _ in solo], q)
        qb = percentile([other[rng.randrange(len(other))] for _ in other], q)
        ratios.append(qb / qa)
    return percentile(ratios, tail), percentile(ratios, 1 - tail)


def rate_between(ends_ns, lo_ns, hi_ns):
    """Steps per second from the step ends in [lo_ns, hi_ns]: (count - 1) over the time
    from the first to the last of them, so no part-step at either edge counts; nan
    with fewer than two."""
    inside = sorted(e for e in ends_ns if lo_ns <= e <= hi_ns)
    if len(inside) < 2 or inside[-1] == inside[0]:
        return float("nan")
    return (len(inside) - 1) * 1e9 / (inside[-1] - inside[0])


def read_stamps(path):
    """The lines of a tenant's stamp file as tuples of ints ("START_NS LATENCY_NS" for
    requests, "END_NS" for training steps); a torn last line (the tenant was killed
    while writing) is left out."""
    out = []
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                try:
                    out.append(tuple(int(p) for p in parts))
                except ValueError:
                    continue
    except OSError:
        pass
    return [t for t in out if t]


def goal_verdict(ratio, ci, goal):
    """'met' when even the interval's top is within goal, 'missed' when its bottom is
    above, 'unclear' when the interval straddles it (more requests would tell)."""
    lo, hi = ci
    if any(math.isnan(x) for x in (ratio, lo, hi)):
        return "n/a"
    if hi <= goal:
        return "met"
    if lo > goal:
        return "missed"
    return "unclear"


def shim_pauses(log_text):
    """How often the shim paused the process, from the line it writes at exit under
    KAIROS_LOG=stderr ("kairos[PID]: time control: pauses=N ..."); 0 when the log has
    no such line (a process never paused writes none)."""
    found = re.findall(r"time control: pauses=(\d+)", log_text)
    return sum(int(n) for n in found)


def shim_sensor_ms(log_text):
    """The CPU time the shim's runnable sensor took in the process, in ms, from the line
    it writes at exit under KAIROS_LOG=stderr ("kairos[PID]: time sensor: samples=N
    sample_mean_us=X sample_ms=Y"), summed over the processes of the log; 0 without one."""
    found = re.findall(r"time sensor: samples=\d+ sample_mean_us=[\d.]+ sample_ms=([\d.]+)",
                       log_text)
    return sum(float(n) for n in found)
