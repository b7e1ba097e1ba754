#!/usr/bin/env python3
"""userd_analyze.py - reads what userd_probe.so logged (channel GPGet/GPPut changes)
against probe_load's phases and prints, per phase, how long some channel had work
queued that the GPU had not fetched (GPPut != GPGet), and when the last such state
ended relative to the moment the host saw the work finish (cudaDeviceSynchronize).

Usage: userd_analyze.py PROBE_LOG LOAD_STDOUT
"""
import sys


def read_events(path):
    events, channels = [], set()
    with open(path) as f:
        for line in f:
            if line.startswith("#") or line.startswith("w "):
                continue
            t, ch, get, put = (int(x) for x in line.split())
            events.append((t, ch, get, put))
            channels.add(ch)
    return events, channels


def read_phases(path):
    phases, extra = [], []
    with open(path) as f:
        for line in f:
            w = line.split()
            if w and w[0] == "phase" and len(w) == 4:
                phases.append((w[1], int(w[2]), int(w[3])))
            elif w:
                extra.append(line.rstrip())
    return phases, extra


WORDS = ["put", "get", "ref", "puthi", "w50", "w54", "tlget", "tlgethi", "gethi"]


def read_words(path):
    """[(t, ch, [9 words])] of the 'w' lines: USERD +0x40..+0x60 at each change."""
    out = []
    with open(path) as f:
        for line in f:
            if line.startswith("w "):
                w = line.split()
                out.append((int(w[1]), int(w[2]), [int(x, 16) for x in w[3:12]]))
    return out


def word_changes(words, phases, names=("long", "long8"), limit=60):
    """For each phase in names and the idle phase after it: every change of a USERD
    word (+0x40..+0x60), ms from the phase's start, to tell whether one moves when a
    kernel ends with nothing queued behind it."""
    last = {}
    rows = []
    for t, ch, w in words:
        old = last.get(ch)
        last[ch] = w
        if old is None:
            continue
        for k, (a, b) in enumerate(zip(old, w)):
            if a != b:
                rows.append((t, ch, WORDS[k], a, b))
    for i, (name, s, e) in enumerate(phases):
        if name not in names:
            continue
        end = phases[i + 1][2] if i + 1 < len(phases) else e
        sel = [r for r in rows if s - 1_000_000 <= r[0] <= end]
        print(f"words in {name} (ends at {(e - s) / 1e6:.1f} ms; the idle after it to "
              f"{(end - s) / 1e6:.1f} ms): {len(sel)} changes")
        for t, ch, k, a, b in sel[:limit]:
            print(f"  {(t - s) / 1e6:9.3f} ms ch {ch:2d} {k:8} {a:x} -> {b:x}")


def pending_intervals(events):
    """[(start, end)] during which some channel had GPPut != GPGet."""
    state, out, since = {}, [], None
    for t, ch, get, put in events:
        state[ch] = put != get
        busy = any(state.values())
        if busy and since is None:
            since = t
        elif not busy and since is not None:
            out.append((since, t))
            since = None
    if since is not None:
        out.append((since, events[-1][0]))
    return out


def main():
    events, channels = read_events(sys.argv[1])
    phases, extra = read_phases(sys.argv[2])
    print(f"userd: {len(events)} changes on {len(channels)} channels")
    if not events:
        print("userd: no USERD change seen (USERD not placed or not readable)")
        return
    iv = pending_intervals(events)
    changes_by_ch = {}
    for _, ch, _, _ in events:
        changes_by_ch[ch] = changes_by_ch.get(ch, 0) + 1
    print("userd: changes per channel", dict(sorted(changes_by_ch.items())))
    print(f"{'phase':8} {'ms':>7} {'pending ms':>10} {'pending %':>9} "
          f"{'last pending end vs done (ms)':>30} {'puts':>6}")
    for name, s, e in phases:
        pend = sum(max(0, min(b, e) - max(a, s)) for a, b in iv)
        ends = [b for a, b in iv if a < e + 5_000_000 and b > s]
        last = (max(ends) - e) / 1e6 if ends else float("nan")
        puts = sum(1 for t, _, _, _ in events if s <= t <= e)
        print(f"{name:8} {(e - s) / 1e6:7.1f} {pend / 1e6:10.2f} {100 * pend / (e - s):9.1f} "
              f"{last:30.2f} {puts:6d}")
    for line in extra:
        print(line)
    word_changes(read_words(sys.argv[1]), phases)


if __name__ == "__main__":
    main()
