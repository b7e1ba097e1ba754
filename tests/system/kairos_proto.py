"""kairos_proto - a client of kairosd's wire protocol (include/kairos/proto.h) in
pure Python (struct.pack), and helpers to run kairosd in a temporary directory for
the system tests. Keep the layouts in step with proto.h."""
import os
import signal
import socket
import struct
import subprocess
import tempfile
import time

MAGIC, VERSION = 0x4b524f53, 3
HELLO, CHARGE, COMMIT, RELEASE, FORKED, INHERITED = 1, 2, 3, 4, 5, 6
INHERITED_EXEC, INHERITED_RECEIVED, INHERITED_MAX_FDS = 1, 2, 16
IMPORTED, SHARED = 23, 24  # legacy CUDA IPC (proto.h history: later additions to 3)
SHARED_FREED = 0x1  # SHARED flags: the sender freed the object (no reply)
IMPORT_BEGIN, IMPORT_END = 1, 2
SHARE_ALL, SHARE_SECURITY_TOKEN, SHARE_CLIENT, SHARE_PID = 1, 2, 3, 4
TENANT_SET, TENANT_DEL, PS, TENANT_MEMBERS, TENANT_ADMIT = 16, 17, 18, 19, 20
CREDIT, CREDIT_RECALL = 21, 22
CREDIT_FMT = "<IIQQQQQQ"  # struct kairos_credit: gpu flags report held returned need least quota
OK, ERROR, WELCOME, GRANT, PS_REPLY, TIME_POLICY = 32, 33, 34, 35, 36, 37
TIME_POLICY_FMT = struct.Struct("<IIQQQIIII")  # struct kairos_time_policy, 48 bytes
assert TIME_POLICY_FMT.size == 48
ERR_PROTOCOL, ERR_VERSION, ERR_NO_TENANT, ERR_PERMISSION, ERR_INVALID, ERR_BUSY, \
    ERR_NOT_REGISTERED = range(1, 8)
REATTACH = 1
CHARGE_MANAGED = 1  # KAIROS_CHARGE_MANAGED
EPHEMERAL = 1
MAX_GPUS = 16
KEEP = (1 << 64) - 1
HDR = struct.Struct("<IHHII")
# struct kairos_ps_reply: flags, n_gpus, tenant, quota, held, refusals, n_pids, pids,
# then per GPU compute_flags, share, limit, priority, target, window, minute (ppm),
# period_us, duty_us, a pad, pauses
PS_REPLY_FMT = struct.Struct("<II64s16Q16Q16QI64I" + "16I" * 9 + "I16Q")
assert PS_REPLY_FMT.size == 1424  # KAIROS_PS_REPLY_SIZE_V1: what a PS without a body gets
# with PS_HOLDS (struct kairos_ps flags) the reply goes on: per GPU hold, then per GPU
# and reason hold_period_ppm, hold_time_ppm, hold_periods, hold_time_us
PS_HOLDS = 1
PS_HOLDS_FMT = struct.Struct("<16I64I64I64Q64Q")
assert PS_REPLY_FMT.size + PS_HOLDS_FMT.size == 3024
PS_COMPUTE_POLICY, PS_COMPUTE_MEASURED, PS_COMPUTE_HOLDS = 1, 2, 4
PS_REMOVED = 2  # PS_REPLY flags: the configuration removed the tenant (it goes when empty)
HOLD_NAMES = ("none", "share", "limit", "yield")  # KAIROS_HOLD_*, the inner index
PRIO_NAMES = ("normal", "latency", "batch")
GiB = 1 << 30
COMPUTE_SET, COMPUTE_CLEAR = 1, 2
PRIORITY = {"normal": 0, "latency": 1, "batch": 2}
PPM = 1000000
COMPUTE_FMT = struct.Struct("<IIBBH")  # struct kairos_compute, 12 bytes
assert COMPUTE_FMT.size == 12
TENANT_SET_FMT = struct.Struct("<64sII16Q" + "IIBBH" * MAX_GPUS)  # 392 bytes
assert TENANT_SET_FMT.size == 392
TENANT_SET_SIZE_V0 = 200  # the body before compute[], still accepted


def name64(s):
    return s.encode().ljust(64, b"\0")


def pack(type_, body=b"", seq=1):
    return HDR.pack(MAGIC, VERSION, type_, len(body), seq) + body


def hello_body(tenant, pid=0, held=None, flags=0):
    held = list(held or []) + [0] * (MAX_GPUS - len(held or []))
    return struct.pack("<II64s16Q", flags, pid, name64(tenant), *held)


def compute_fields(policy):
    """struct kairos_compute's fields for one GPU: policy is None (keep), "clear", or a
    dict with share and limit in percent and priority by name."""
    if policy is None:
        return (0, 0, 0, 0, 0)
    if policy == "clear":
        return (0, 0, 0, COMPUTE_CLEAR, 0)
    return (round(policy.get("share", 0) * PPM / 100), round(policy.get("limit", 0) * PPM / 100),
            PRIORITY[policy.get("priority", "normal")], COMPUTE_SET, 0)


def tenant_set_body(tenant, quotas, flags=0, compute=None):
    """TENANT_SET: quotas per GPU (KEEP beyond them); compute maps a GPU index to a
    policy as compute_fields takes it. n_gpus covers both."""
    compute = compute or {}
    n = max([len(quotas)] + [g + 1 for g in compute])
    q = list(quotas) + [KEEP] * (MAX_GPUS - len(quotas))
    c = []
    for g in range(MAX_GPUS):
        c += compute_fields(compute.get(g))
    return TENANT_SET_FMT.pack(name64(tenant), n, flags, *q, *c)


def time_policy(body):
    """The fields of a TIME_POLICY body as a dict."""
    gpu, flags, seq, ts, epoch, period, phase, duty, _ = TIME_POLICY_FMT.unpack(body)
    return dict(gpu=gpu, flags=flags, seq=seq, timeslice_us=ts, epoch_ns=epoch,
                period_us=period, phase_us=phase, duty_us=duty)


def ps_compute(f, n):
    """The compute figures of an unpacked PS_REPLY, per GPU: None without a policy,
    else a dict (shares in ppm; window and minute None when not measured)."""
    arrays = [f[116 + 16 * k:132 + 16 * k] for k in range(9)]
    flags, share, limit, prio, target, window, minute, period, duty = arrays
    pauses = f[117 + 16 * 9:]
    out = []
    for g in range(n):
        if not flags[g] & PS_COMPUTE_POLICY:
            out.append(None)
            continue
        measured = bool(flags[g] & PS_COMPUTE_MEASURED)
        out.append({"share": share[g], "limit": limit[g], "priority": PRIO_NAMES[prio[g]],
                    "target": target[g], "window": window[g] if measured else None,
                    "minute": minute[g] if measured else None, "period_us": period[g],
                    "duty_us": duty[g], "pauses": pauses[g]})
    return out


def ps_holds(tail, flags, n):
    """The hold figures of a whole PS_REPLY's tail, per GPU: None where compute_flags
    lacks PS_COMPUTE_HOLDS, else a dict (reason names as keys; ppm, periods, us)."""
    h = PS_HOLDS_FMT.unpack(tail)
    per = lambda base, g: dict(zip(HOLD_NAMES, h[base + 4 * g:base + 4 * g + 4]))
    return [{"now": HOLD_NAMES[h[g]], "period_ppm": per(16, g), "time_ppm": per(80, g),
             "periods": per(144, g), "time_us": per(208, g)}
            if flags[g] & PS_COMPUTE_HOLDS else None for g in range(n)]


class KairosError(Exception):
    def __init__(self, code, message):
        super().__init__(f"ERROR {code}: {message}")
        self.code, self.message = code, message


class Client:
    def __init__(self, path, timeout=5.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(path)
        except OSError:
            self.sock.close()
            raise
        self.seq = 0
        self.policies = []  # TIME_POLICY bodies that arrived while a reply was awaited

    def close(self):
        self.sock.close()

    def send(self, type_, body=b""):
        self.seq += 1
        self.sock.send(pack(type_, body, self.seq))
        return self.seq

    def recv(self):
        data = self.sock.recv(4096)
        if not data:
            raise ConnectionError("kairosd closed the connection")
        magic, version, type_, size, seq = HDR.unpack_from(data)
        body = data[HDR.size:]
        assert magic == MAGIC and version == VERSION and size == len(body), data
        if type_ == ERROR:
            code = struct.unpack_from("<I", body)[0]
            raise KairosError(code, body[4:].split(b"\0")[0].decode())
        return type_, seq, body

    def reply(self):
        """The next message that is not a TIME_POLICY (a shim gets those at any time
        after WELCOME, between its replies; they are kept in self.policies)."""
        while True:
            type_, seq, body = self.recv()
            if type_ != TIME_POLICY:
                return type_, seq, body
            self.policies.append(time_policy(body))

    def request(self, type_, body=b""):
        seq = self.send(type_, body)
        type_, rseq, body = self.reply()
        assert rseq == seq, (rseq, seq)
        return type_, body

    def hello(self, tenant, held=None, reattach=False):
        t, body = self.request(HELLO, hello_body(tenant, os.getpid(), held,
                                                 REATTACH if reattach else 0))
        assert t == WELCOME
        tid, n = struct.unpack_from("<II", body)
        return tid, list(struct.unpack_from("<16Q", body, 8))[:n]

    def charge(self, gpu, nbytes, token=0, flags=0):
        t, body = self.request(CHARGE, struct.pack("<IIQQ", gpu, flags, nbytes, token))
        assert t == GRANT
        granted, _, quota, held = struct.unpack("<IIQQ", body)
        return bool(granted), quota, held

    def commit(self, gpu, token, ok, reserved, actual):
        self.send(COMMIT, struct.pack("<IIQQQ", gpu, 1 if ok else 0, token, reserved, actual))

    def release(self, gpu, nbytes):
        self.send(RELEASE, struct.pack("<IIQ", gpu, 0, nbytes))

    def tenant_set(self, tenant, quotas, flags=0, compute=None):
        t, _ = self.request(TENANT_SET, tenant_set_body(tenant, quotas, flags, compute))
        assert t == OK

    def tenant_members(self, tenant, users=(), groups=(), cgroups=()):
        """TENANT_MEMBERS: who may join tenant (struct kairos_tenant_members)."""
        ids = lambda v: struct.pack("<16I", *(list(v) + [0] * (16 - len(v))))
        cg = b"".join(c.encode().ljust(128, b"\0") for c in cgroups) + \
            b"\0" * 128 * (4 - len(cgroups))
        body = name64(tenant) + struct.pack("<IIII", len(users), len(groups), len(cgroups), 0) + \
            ids(users) + ids(groups) + cg
        t, _ = self.request(TENANT_MEMBERS, body)
        assert t == OK

    def tenant_admit(self, tenant, pid=0):
        """TENANT_ADMIT: pid (0: this process) and its descendants may join tenant."""
        t, _ = self.request(TENANT_ADMIT, name64(tenant) + struct.pack("<II", pid, 0))
        assert t == OK

    def ps(self, holds=False):
        """PS as a kairos of before asks it (no body: 1424-byte replies), or with
        PS_HOLDS (whole replies: each tenant's "holds" per GPU, ps_holds)."""
        seq = self.send(PS, struct.pack("<II", PS_HOLDS, 0) if holds else b"")
        out = {}
        while True:
            t, rseq, body = self.reply()
            assert t == PS_REPLY and rseq == seq
            assert len(body) == PS_REPLY_FMT.size + (PS_HOLDS_FMT.size if holds else 0)
            f = PS_REPLY_FMT.unpack(body[:PS_REPLY_FMT.size])
            flags, n = f[0], f[1]
            name = f[2].split(b"\0")[0].decode()
            quota, held, refusals = f[3:19], f[19:35], f[35:51]
            n_pids, pids = f[51], f[52:116]
            if n or name:
                out[name] = {"removed": bool(flags & PS_REMOVED),
                             "quota": list(quota[:n]), "held": list(held[:n]),
                             "refusals": list(refusals[:n]),
                             "pids": sorted(pids[:min(n_pids, 64)]),
                             "compute": ps_compute(f, n)}
                if holds:
                    out[name]["holds"] = ps_holds(body[PS_REPLY_FMT.size:], f[116:132], n)
            if flags & 1:
                return out


class Daemon:
    """kairosd in a temporary directory, with the fake GPU backend when asked."""

    def __init__(self, binary, tenants_yaml="", admins=None, gpus=2, fake=None, extra="",
                 workdir=None, env=None):
        self.binary = binary
        self.env = env  # kairosd's environment (None: the test's)
        self.log_level = "debug"
        self.dir = workdir or tempfile.mkdtemp(prefix="kairosd-test-")
        os.chmod(self.dir, 0o755)  # so a test client may run as another user
        self.socket = os.path.join(self.dir, "run", "kairosd.sock")
        self.state = os.path.join(self.dir, "state.json")
        self.config = os.path.join(self.dir, "kairosd.yaml")
        self.log = os.path.join(self.dir, "kairosd.log")
        self.log_start = 0
        self.fake = None
        admins = [os.getuid()] if admins is None else admins
        with open(self.config, "w") as f:
            f.write(f"socket: {self.socket}\nstate: {self.state}\n"
                    f"admins: [{', '.join(str(a) for a in admins)}]\ngpus: {gpus}\n{extra}"
                    f"tenants:\n{tenants_yaml or '  []'}\n")
        if fake is not None:
            self.fake = os.path.join(self.dir, "gpus.txt")
            self.write_fake(fake)
        self.proc = None

    def write_fake(self, text):
        tmp = self.fake + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.rename(tmp, self.fake)

    def start(self, timeout=10):
        args = [self.binary, "-c", self.config, "-l", self.log_level]
        if self.fake:
            args += ["--fake-gpu", self.fake]
        self.logf = open(self.log, "a")
        self.log_start = os.fstat(self.logf.fileno()).st_size  # this start's lines (wait_ready)
        self.proc = subprocess.Popen(args, stdout=self.logf, stderr=subprocess.STDOUT,
                                     env=self.env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kairosd exited {self.proc.returncode}:\n{self.read_log()}")
            try:
                Client(self.socket, timeout=1).close()
                return self
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("kairosd did not start:\n" + self.read_log())

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        rc = self.proc.returncode if self.proc else None
        if self.proc:
            self.logf.close()
        self.proc = None
        return rc

    def wait_ready(self, timeout=10):
        """Waits for the "ready" log line of kairosd's last start (a restart appends
        to the same log, after the first start's "ready"): its socket accepts
        (backlog) before the loop runs, and "ready" also follows the metrics
        endpoint and what it restored from the state file. Returns self."""
        deadline = time.monotonic() + timeout
        while b" ready: " not in self.log_since_start() and time.monotonic() < deadline:
            time.sleep(0.02)
        return self

    def log_since_start(self):
        """The log's bytes written since kairosd's last start."""
        try:
            with open(self.log, "rb") as f:
                f.seek(self.log_start)
                return f.read()
        except OSError:
            return b""

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def read_log(self):
        try:
            with open(self.log) as f:
                return f.read()
        except OSError:
            return ""

    def client(self):
        return Client(self.socket)

    def ps(self, holds=False):
        """Client.ps over a connection of its own, closed after."""
        c = self.client()
        try:
            return c.ps(holds)
        finally:
            c.close()

    def shim_env(self, on_daemon_down="closed", socket=None, register="asked"):
        """What a tenant process's environment needs so that its shim reaches this
        daemon: a shim.conf (core/shim_conf.h) in the daemon's directory, named by
        KAIROS_SHIM_CONF (honoured because the file is the test runner's, who also
        owns the build's libkairos.so, and writable by no one else). Tests say it
        only through here, so how the shim finds a private daemon changes in one
        place. socket: another socket to name (a daemon that is not there);
        register: always to register processes that name no tenant too."""
        return shim_env_at(self.dir, socket or self.socket, on_daemon_down, register)


def shim_env_at(directory, socket, on_daemon_down="closed", register="asked"):
    """Daemon.shim_env() for a daemon that is not a Daemon (a fake one in a test):
    a shim.conf in directory naming socket, and the environment that names it."""
    name = "shim-%s-%s-%x.conf" % (on_daemon_down, register, abs(hash(socket)))
    path = os.path.join(directory, name)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"# written by tests/system/kairos_proto.py\nsocket: {socket}\n"
                f"on_daemon_down: {on_daemon_down}\nregister: {register}\n")
    os.chmod(tmp, 0o644)
    os.rename(tmp, path)
    return {"KAIROS_SHIM_CONF": path}
