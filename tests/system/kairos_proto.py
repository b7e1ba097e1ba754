"""kairos_proto - a client of kairosd's wire protocol (include/kairos/proto.h) in
pure Python (struct.pack), and helpers to run kairosd in a temporary directory for
the system tests. Its numbers and struct layouts are read from proto.h itself
(proto_h.py; test_proto_h.py checks the reading against the C compiler)."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import proto_h

_C, _S = proto_h.read()  # every number and layout below comes from proto.h
MAGIC, VERSION = _C["KAIROS_PROTO_MAGIC"], _C["KAIROS_PROTO_VERSION"]
HELLO, CHARGE, COMMIT, RELEASE, FORKED, INHERITED = (
    _C["KAIROS_MSG_" + n] for n in ("HELLO", "CHARGE", "COMMIT", "RELEASE", "FORKED",
                                    "INHERITED"))
INHERITED_EXEC, INHERITED_RECEIVED, INHERITED_MAX_FDS = (
    _C["KAIROS_INHERITED_" + n] for n in ("EXEC", "RECEIVED", "MAX_FDS"))
IMPORTED, SHARED = _C["KAIROS_MSG_IMPORTED"], _C["KAIROS_MSG_SHARED"]  # legacy CUDA IPC
SHARED_FREED = _C["KAIROS_SHARED_FREED"]  # SHARED flags: the sender freed the object
IMPORT_BEGIN, IMPORT_END = _C["KAIROS_IMPORT_BEGIN"], _C["KAIROS_IMPORT_END"]
SHARE_ALL, SHARE_SECURITY_TOKEN, SHARE_CLIENT, SHARE_PID = (
    _C["KAIROS_SHARE_" + n] for n in ("ALL", "SECURITY_TOKEN", "CLIENT", "PID"))
TENANT_SET, TENANT_DEL, PS, TENANT_MEMBERS, TENANT_ADMIT = (
    _C["KAIROS_MSG_" + n] for n in ("TENANT_SET", "TENANT_DEL", "PS", "TENANT_MEMBERS",
                                    "TENANT_ADMIT"))
CREDIT, CREDIT_RECALL = _C["KAIROS_MSG_CREDIT"], _C["KAIROS_MSG_CREDIT_RECALL"]
FORK_TICKETS, ROOM, RUNNABLE = (_C["KAIROS_MSG_" + n] for n in ("FORK_TICKETS", "ROOM",
                                                                 "RUNNABLE"))
CREDIT_FMT = _S["kairos_credit"].fmt  # gpu flags report held returned need least quota
OK, ERROR, WELCOME, GRANT, PS_REPLY, TIME_POLICY = (
    _C["KAIROS_MSG_" + n] for n in ("OK", "ERROR", "WELCOME", "GRANT", "PS_REPLY",
                                    "TIME_POLICY"))
TIME_POLICY_FMT = _S["kairos_time_policy"].struct
ERR_PROTOCOL, ERR_VERSION, ERR_NO_TENANT, ERR_PERMISSION, ERR_INVALID, ERR_BUSY, \
    ERR_NOT_REGISTERED = (_C["KAIROS_ERR_" + n] for n in (
        "PROTOCOL", "VERSION", "NO_TENANT", "PERMISSION", "INVALID", "BUSY",
        "NOT_REGISTERED"))
REATTACH = _C["KAIROS_HELLO_REATTACH"]
CHARGE_MANAGED = _C["KAIROS_CHARGE_MANAGED"]
EPHEMERAL = _C["KAIROS_TENANT_EPHEMERAL"]
MAX_GPUS = _C["KAIROS_MAX_GPUS"]
KEEP = _C["KAIROS_QUOTA_KEEP"]
HDR = _S["kairos_hdr"].struct
# struct kairos_ps_reply up to its holds (what a PS without a body gets): flags, n_gpus,
# tenant, quota, held, refusals, n_pids, pids, then per GPU compute_flags, share, limit,
# priority, target, window, minute (ppm), period_us, duty_us, a pad, pauses
PS_REPLY_SIZE_V1 = _C["KAIROS_PS_REPLY_SIZE_V1"]
PS_REPLY_FMT = _S["kairos_ps_reply"].part(stop="hold")
assert PS_REPLY_FMT.size == PS_REPLY_SIZE_V1
# with PS_HOLDS (struct kairos_ps flags) the reply goes on: per GPU hold, then per GPU
# and reason hold_period_ppm, hold_time_ppm, hold_periods, hold_time_us
PS_HOLDS = _C["KAIROS_PS_HOLDS"]
PS_HOLDS_FMT = _S["kairos_ps_reply"].part(first="hold", stop="fault_domain")
assert PS_REPLY_FMT.size + PS_HOLDS_FMT.size == _C["KAIROS_PS_REPLY_SIZE_V2"]
# with PS_FAULTS too: the fault domain, faults caused and lost, the last fault
PS_FAULTS = _C["KAIROS_PS_FAULTS"]
PS_FAULTS_FMT = _S["kairos_ps_reply"].part(first="fault_domain")
PS_COMPUTE_POLICY, PS_COMPUTE_MEASURED, PS_COMPUTE_HOLDS = (
    _C["KAIROS_PS_COMPUTE_" + n] for n in ("POLICY", "MEASURED", "HOLDS"))
PS_LAST, PS_REMOVED = _C["KAIROS_PS_LAST"], _C["KAIROS_PS_REMOVED"]
HOLD_NAMES = ("none", "share", "limit", "yield")  # KAIROS_HOLD_*, the inner index
assert [_C["KAIROS_HOLD_" + n.upper()] for n in HOLD_NAMES] == list(range(len(HOLD_NAMES)))
PRIO_NAMES = ("normal", "latency", "batch")
assert [_C["KAIROS_PRIO_" + n.upper()] for n in PRIO_NAMES] == list(range(len(PRIO_NAMES)))
GiB = 1 << 30
COMPUTE_SET, COMPUTE_CLEAR = _C["KAIROS_COMPUTE_SET"], _C["KAIROS_COMPUTE_CLEAR"]
PRIORITY = {n: i for i, n in enumerate(PRIO_NAMES)}
PPM = _C["KAIROS_PPM"]
COMPUTE_FMT = _S["kairos_compute"].struct
TENANT_SET_FMT = _S["kairos_tenant_set"].part(stop="fault_domain")  # without the domain
TENANT_SET_SIZE_V0 = _C["KAIROS_TENANT_SET_SIZE_V0"]  # the body before compute[], accepted
TENANT_SET_SIZE_V1 = _C["KAIROS_TENANT_SET_SIZE_V1"]  # the body before fault_domain
assert TENANT_SET_FMT.size == TENANT_SET_SIZE_V1
for _name, _value in _C.items():  # and every other KAIROS_X as X (KAIROS_CREDIT_AHEAD)
    globals().setdefault(_name[len("KAIROS_"):], _value)
LAYOUTS = _S  # every struct of proto.h by name ("kairos_inherited")


def body(struct_name, **fields):
    """The bytes of struct kairos_<struct_name>, fields by name (others 0):
    body("credit", gpu=0, need=8 << 20)."""
    return _S["kairos_" + struct_name].pack(**fields)


def fields(struct_name, data):
    """The fields of struct kairos_<struct_name> in data, by name (Layout.values)."""
    return _S["kairos_" + struct_name].values(data)

def name64(s):
    return s.encode().ljust(_C["KAIROS_NAME_MAX"], b"\0")


def pack(type_, body=b"", seq=1):
    return HDR.pack(MAGIC, VERSION, type_, len(body), seq) + body


def hello_body(tenant, pid=0, held=None, flags=0):
    return _S["kairos_hello"].pack(flags=flags, pid=pid, tenant=tenant, held=list(held or []))


def compute_fields(policy):
    """struct kairos_compute's fields for one GPU: policy is None (keep), "clear", or a
    dict with share and limit in percent and priority by name."""
    if policy is None:
        return (0, 0, 0, 0, 0)
    if policy == "clear":
        return (0, 0, 0, COMPUTE_CLEAR, 0)
    return (round(policy.get("share", 0) * PPM / 100), round(policy.get("limit", 0) * PPM / 100),
            PRIORITY[policy.get("priority", "normal")], COMPUTE_SET, 0)


def tenant_set_body(tenant, quotas, flags=0, compute=None, fault_domain=None):
    """TENANT_SET: quotas per GPU (KEEP beyond them); compute maps a GPU index to a
    policy as compute_fields takes it. n_gpus covers both. fault_domain None: the
    body without it (TENANT_SET_SIZE_V1, the domain unchanged); "" none."""
    compute = compute or {}
    n = max([len(quotas)] + [g + 1 for g in compute])
    q = list(quotas) + [KEEP] * (MAX_GPUS - len(quotas))
    c = []
    for g in range(MAX_GPUS):
        c += compute_fields(compute.get(g))
    body = TENANT_SET_FMT.pack(name64(tenant), n, flags, *q, *c)
    return body if fault_domain is None else body + name64(fault_domain)


def time_policy(body):
    """The fields of a TIME_POLICY body as a dict."""
    f = _S["kairos_time_policy"].values(body)
    del f["pad"]
    return f


def ps_compute(f, n):
    """The compute figures of a PS_REPLY's fields (Layout.values), per GPU: None
    without a policy, else a dict (shares in ppm; window and minute None when not
    measured)."""
    out = []
    for g in range(n):
        if not f["compute_flags"][g] & PS_COMPUTE_POLICY:
            out.append(None)
            continue
        measured = bool(f["compute_flags"][g] & PS_COMPUTE_MEASURED)
        out.append({"share": f["share_ppm"][g], "limit": f["limit_ppm"][g],
                    "priority": PRIO_NAMES[f["priority"][g]], "target": f["target_ppm"][g],
                    "window": f["window_ppm"][g] if measured else None,
                    "minute": f["minute_ppm"][g] if measured else None,
                    "period_us": f["period_us"][g], "duty_us": f["duty_us"][g],
                    "pauses": f["pauses"][g]})
    return out


def ps_holds(tail, flags, n):
    """The hold figures of a whole PS_REPLY's tail, per GPU: None where compute_flags
    lacks PS_COMPUTE_HOLDS, else a dict (reason names as keys; ppm, periods, us)."""
    h = _S["kairos_ps_reply"].values(tail, first="hold", stop="fault_domain")
    r = len(HOLD_NAMES)
    per = lambda key, g: dict(zip(HOLD_NAMES, h[key][r * g:r * g + r]))
    return [{"now": HOLD_NAMES[h["hold"][g]], "period_ppm": per("hold_period_ppm", g),
             "time_ppm": per("hold_time_ppm", g), "periods": per("hold_periods", g),
             "time_us": per("hold_time_us", g)}
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
            e = _S["kairos_error"]
            e = e.values(body.ljust(e.size, b"\0")[:e.size])
            raise KairosError(e["code"], e["message"].split(b"\0")[0].decode())
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
        w = _S["kairos_welcome"].values(body)
        return w["tenant_id"], w["quota"][:w["n_gpus"]]

    def charge(self, gpu, nbytes, token=0, flags=0):
        t, body = self.request(CHARGE, _S["kairos_charge"].pack(gpu=gpu, flags=flags,
                                                                 bytes=nbytes, token=token))
        assert t == GRANT
        g = _S["kairos_grant"].values(body)
        return bool(g["granted"]), g["quota"], g["held"]

    def commit(self, gpu, token, ok, reserved, actual):
        self.send(COMMIT, _S["kairos_commit"].pack(gpu=gpu, ok=1 if ok else 0, token=token,
                                                   reserved=reserved, actual=actual))

    def release(self, gpu, nbytes):
        self.send(RELEASE, _S["kairos_release"].pack(gpu=gpu, bytes=nbytes))

    def tenant_set(self, tenant, quotas, flags=0, compute=None, fault_domain=None):
        t, _ = self.request(TENANT_SET, tenant_set_body(tenant, quotas, flags, compute,
                                                        fault_domain))
        assert t == OK

    def tenant_members(self, tenant, users=(), groups=(), cgroups=()):
        """TENANT_MEMBERS: who may join tenant (struct kairos_tenant_members)."""
        body = _S["kairos_tenant_members"].pack(
            tenant=tenant, n_users=len(users), n_groups=len(groups), n_cgroups=len(cgroups),
            users=list(users), groups=list(groups), cgroups=list(cgroups))
        t, _ = self.request(TENANT_MEMBERS, body)
        assert t == OK

    def tenant_admit(self, tenant, pid=0):
        """TENANT_ADMIT: pid (0: this process) and its descendants may join tenant."""
        t, _ = self.request(TENANT_ADMIT, _S["kairos_tenant_admit"].pack(tenant=tenant, pid=pid))
        assert t == OK

    def ps(self, holds=False, faults=False):
        """PS as a kairos of before asks it (no body: 1424-byte replies), or with
        PS_HOLDS (each tenant's "holds" per GPU, ps_holds), and with PS_FAULTS too
        (whole replies: each tenant's "faults", a dict of the reply's fault fields)."""
        flags = (PS_HOLDS if holds or faults else 0) | (PS_FAULTS if faults else 0)
        holds = holds or faults
        seq = self.send(PS, _S["kairos_ps"].pack(flags=flags) if flags else b"")
        out = {}
        while True:
            t, rseq, body = self.reply()
            assert t == PS_REPLY and rseq == seq
            assert len(body) == (PS_REPLY_FMT.size + (PS_HOLDS_FMT.size if holds else 0) +
                                 (PS_FAULTS_FMT.size if faults else 0))
            f = _S["kairos_ps_reply"].values(body[:PS_REPLY_FMT.size], stop="hold")
            flags, n = f["flags"], f["n_gpus"]
            name = f["tenant"].split(b"\0")[0].decode()
            if n or name:
                out[name] = {"removed": bool(flags & PS_REMOVED),
                             "quota": f["quota"][:n], "held": f["held"][:n],
                             "refusals": f["refusals"][:n],
                             "pids": sorted(f["pids"][:min(f["n_pids"], len(f["pids"]))]),
                             "compute": ps_compute(f, n)}
                if holds:
                    tail = body[PS_REPLY_FMT.size:PS_REPLY_FMT.size + PS_HOLDS_FMT.size]
                    out[name]["holds"] = ps_holds(tail, f["compute_flags"], n)
                if faults:
                    v = _S["kairos_ps_reply"].values(
                        body[PS_REPLY_FMT.size + PS_HOLDS_FMT.size:], first="fault_domain")
                    v["fault_domain"] = v["fault_domain"].split(b"\0")[0].decode()
                    out[name]["faults"] = v
            if flags & PS_LAST:
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

    def stop_after(self, test):
        """Stops kairosd at the end of test (a unittest.TestCase), which fails if kairosd
        died during it (its log is printed then, or when the stop was not clean); the
        daemon's folder goes. Returns stop()'s status."""
        alive = self.alive()
        rc = self.stop()
        if not alive or rc != 0:
            print(self.read_log(), file=sys.stderr)
        test.assertTrue(alive, "kairosd died during the test")
        shutil.rmtree(self.dir, ignore_errors=True)
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
