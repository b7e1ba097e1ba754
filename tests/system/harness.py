"""harness - what the system tests share around the processes they start: the
environment of a program run under the shim and the fake driver, polling, a free port,
a datagram socket to listen as systemd, a fakeapp started until it holds its memory,
and killing and reaping children. kairos_proto owns the protocol and the private
kairosd (Daemon)."""
import os
import re
import socket
import subprocess
import threading
import time

# ASan's runtime, where the build needs it preloaded first
ASAN_FIRST = os.environ.get("KAIROS_PRELOAD_FIRST", "")


def preload_env(shim, fakedrv, **extra):
    """The test runner's environment less its KAIROS_* settings, with the shim and the
    fake driver preloaded (after ASan's runtime where the build needs it), KAIROS_SHIM
    naming the shim, and extra on top."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("KAIROS_")}
    e["LD_PRELOAD"] = " ".join(p for p in (ASAN_FIRST, shim, fakedrv) if p)
    e["ASAN_OPTIONS"] = "detect_leaks=0:verify_asan_link_order=0"
    e["KAIROS_SHIM"] = shim
    e.update(extra)
    return e


def open_socket_inodes():
    """The inodes of every socket some process this user can see has open."""
    inodes = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(int(link[8:-1]))
    return inodes


def driver_holds(journal):
    """What the fake driver holds on the machine, in bytes, from FAKEDRV_JOURNAL
    (tests/fakedrv/fakedrv.h): each allocation lives while it is not freed and its
    file is open somewhere, or while an export file holding it (D lines) is open, or
    while a dup of it in another process (I lines, legacy CUDA IPC) is not freed and
    its file is open. A handle used again after its free names a new object (each
    A or I line of a handle starts its next generation)."""
    size, freed, held_by, dups, gen = {}, set(), {}, {}, {}

    def obj(ino, client, handle, new=False):
        base = (int(ino), client, handle)
        if new:
            gen[base] = gen.get(base, 0) + 1
        return (*base, gen.get(base, 0))
    try:
        with open(journal) as f:
            for line in f:
                w = line.split()
                if w and w[0] == "A" and len(w) == 6:
                    size[obj(*w[1:4], new=True)] = int(w[5])
                elif w and w[0] == "F" and len(w) == 4:
                    freed.add(obj(*w[1:4]))
                elif w and w[0] == "D" and len(w) == 7:
                    held_by.setdefault(obj(*w[4:7]), set()).add(int(w[1]))
                elif w and w[0] == "I" and len(w) == 7:
                    dups.setdefault(obj(*w[4:7]), set()).add(obj(*w[1:4], new=True))
    except FileNotFoundError:
        return 0
    open_files = open_socket_inodes()

    def dup_lives(key):
        return any(d not in freed and d[0] in open_files for d in dups.get(key, ()))
    return sum(n for key, n in size.items()
               if (key not in freed and key[0] in open_files) or
               held_by.get(key, set()) & open_files or dup_lives(key))


def line_counts(line):
    """The key=number pairs of one line of fakeapp's (or a probe's) output."""
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}


def driver_peak(journal):
    """The most the fake driver ever held at once, from FAKEDRV_JOURNAL's lines in the
    order the processes appended them (an allocation's line is written when the
    driver made it, a free's before the free returns: before the shim can tell
    kairosd, so before any grant that free made room for)."""
    size, now, peak = {}, 0, 0
    with open(journal) as f:
        for line in f:
            w = line.split()
            if w and w[0] == "A" and len(w) == 6:
                size[(w[1], w[2], w[3])] = int(w[5])
                now += int(w[5])
            elif w and w[0] == "F" and len(w) == 4:
                now -= size.pop((w[1], w[2], w[3]), 0)
            peak = max(peak, now)
    return peak


def wait_for(pred, timeout=5.0, step=0.01):
    """Calls pred every step seconds until it is true or timeout passes; its last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return pred()


def wait_value(cond, what, timeout=10):
    """cond's value once true (wait_for polls it), or a failure naming what."""
    found = []
    if not wait_for(lambda: found.append(cond()) or found[-1], timeout=timeout):
        raise AssertionError(f"timed out waiting for {what}")
    return found[-1]


def signal_state(pid):
    """Process pid's threads with their signal masks (from /proc), for a failure's text."""
    rows = []
    try:
        for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                keep = ("Name", "State", "SigPnd", "ShdPnd", "SigBlk", "SigCgt")
                rows.append(" ".join(l.split(":")[1].strip() for l in f
                                     if l.split(":")[0] in keep))
    except OSError as e:
        rows.append(f"({e})")
    return f"pid {pid}: " + "; ".join(rows)


def line_of(p, timeout=20):
    """The next line of child p's stdout, stripped, within timeout seconds; else a
    failure that says what p's threads were doing with their signals."""
    got = []
    reader = threading.Thread(target=lambda: got.append(p.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    if not got:
        raise AssertionError(f"no line in {timeout} s from {signal_state(p.pid)}")
    return got[0].strip()


def hold_still(seconds, why):
    """The bounded wait of a test that checks that something does NOT happen: seconds
    long enough for it to have happened were it going to (why says what and why that
    long); the test then asserts it did not. Never a wait for something to happen:
    that is wait_for, on the condition, with a deadline."""
    assert why, "hold_still: say what does not happen"
    time.sleep(seconds)


def pass_time(seconds, why):
    """Lets a duration that the code under test measures go by (a grace period, a
    baseline sample, a save delay) before the test acts: the clock is the condition.
    why names the duration. Never a wait for something to happen (wait_for)."""
    assert why, "pass_time: say which duration"
    time.sleep(seconds)


def polling(timeout, step=0.05):
    """For a wait on a condition that takes more than a predicate: yields at once,
    then every step seconds until timeout has passed (for _ in polling(5): ... break;
    what follows the loop is the deadline's case)."""
    deadline = time.monotonic() + timeout
    while True:
        yield
        if time.monotonic() >= deadline:
            return
        time.sleep(step)


def ready_pipe():
    """A pipe by which a child says it reached a point: the child calls
    say_ready(w); the parent wait_ready(r, timeout) (True when it did in time)."""
    return os.pipe()


def say_ready(w):
    os.write(w, b"r")


def wait_ready(r, timeout=30.0):
    import select
    return bool(select.select([r], [], [], timeout)[0]) and os.read(r, 1) == b"r"


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def datagram_socket(path, timeout=10):
    """A datagram socket bound at path (a NOTIFY_SOCKET, a journal socket), whose
    receives give up after timeout seconds."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    s.settimeout(timeout)
    return s


def reap(procs):
    """Kills those of procs still running and waits for each (reading what is left of
    its pipes)."""
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.communicate()


def start_holding(test, cmd, env, procs):
    """Starts cmd (`kairos run ... fakeapp ...`), adds it to procs and returns it once
    fakeapp says it holds its memory; fails test with what it said instead."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env)
    procs.append(p)
    line = p.stdout.readline()
    if not line.startswith("fakeapp: holding"):
        p.kill()
        test.fail(f"{line!r}: {p.communicate()[1]}")
    return p
