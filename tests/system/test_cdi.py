#!/usr/bin/env python3
"""kairos cdi: the CDI specification of kairosd's tenants validates against the
CDI 0.6.0 schema at the lowest version that expresses it (0.3.0; 0.5.0 once a device
name begins with a digit, which older versions forbid) (tests/system/data/cdi-schema.json, written from the spec's field
definitions), one device per tenant named by it with KAIROS_TENANT and the device
nodes of its GPUs only, the shim, the preload file and the socket for all; the
preload file names the shim's path in the container; a tenant whose name CDI
refuses is left out with a warning, and refused when asked for by name; an
unknown tenant, an absent kairosd or a relative shim path fail with exit 1 and
leave no half-written specification. The schema itself refuses what the spec
forbids (so that a pass means something).
Usage: test_cdi.py KAIROSD_BINARY KAIROS_BINARY SCHEMA"""
import json
import os
import stat
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import debian_python  # noqa: E402

debian_python.require("jsonschema")
import jsonschema  # noqa: E402
import kairos_proto as kp  # noqa: E402

KAIROSD, KAIROS, SCHEMA = sys.argv[1], sys.argv[2], sys.argv[3]
FAKE = "gpu 0 GPU-fake-0000 85899345920\ngpu 1 GPU-fake-0001 85899345920\n"
TENANTS = ("  - name: alice\n    memory: { 0: 8G }\n"
           "  - name: bob\n    memory: { 1: 4G }\n    compute: { 1: { share: 20% } }\n"
           "  - name: every.gpu\n"
           "  - name: trailing_\n    memory: { 0: 1G }\n"
           "  - name: 4gpu\n    memory: { 0: 1G }\n")


def validator():
    with open(SCHEMA) as f:
        return jsonschema.Draft7Validator(json.load(f))


class Cdi(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = kp.Daemon(KAIROSD, TENANTS, fake=FAKE).start()
        cls.shim = os.path.join(cls.d.dir, "libkairos.so")
        open(cls.shim, "wb").close()
        cls.schema = validator()

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def kairos_cdi(self, *args, socket=None):
        return subprocess.run([KAIROS, "cdi", "--shim", self.shim, "--socket",
                               socket or self.d.socket, *args],
                              capture_output=True, text=True, timeout=30)

    def paths(self, name):
        return (os.path.join(self.d.dir, name + ".json"),
                os.path.join(self.d.dir, "cdi", name + ".preload"))

    def test_spec_validates_and_says_what_each_tenant_gets(self):
        spec_path, preload = self.paths("all")
        r = self.kairos_cdi("--output", spec_path, "--preload-file", preload)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("tenant 'trailing_' left out", r.stderr)
        with open(spec_path) as f:
            spec = json.load(f)
        errors = [e.message for e in self.schema.iter_errors(spec)]
        self.assertEqual(errors, [])
        # 0.5.0: the first version that lets a device name (4gpu) begin with a digit
        self.assertEqual((spec["cdiVersion"], spec["kind"]), ("0.5.0", "kairos.dev/tenant"))
        devices = {d["name"]: d["containerEdits"] for d in spec["devices"]}
        self.assertEqual(set(devices), {"alice", "bob", "every.gpu", "4gpu"})
        nodes = {n: [x["path"] for x in e["deviceNodes"]] for n, e in devices.items()}
        self.assertEqual(nodes, {"alice": ["/dev/nvidia0"], "bob": ["/dev/nvidia1"],
                                 "every.gpu": ["/dev/nvidia0", "/dev/nvidia1"],
                                 "4gpu": ["/dev/nvidia0"]})
        for name, edits in devices.items():
            self.assertEqual(edits["env"], [f"KAIROS_TENANT={name}"])
        common = spec["containerEdits"]
        self.assertNotIn("env", common)  # the shim's settings are the node's file
        self.assertEqual([x["path"] for x in common["deviceNodes"]],
                         ["/dev/nvidiactl", "/dev/nvidia-uvm"])
        mounts = {m["containerPath"]: m for m in common["mounts"]}
        shim_in = "/usr/lib/kairos/libkairos.so"
        self.assertEqual(mounts[shim_in]["hostPath"], os.path.realpath(self.shim))
        self.assertEqual(mounts["/etc/ld.so.preload"]["hostPath"], preload)
        sock_dir = os.path.dirname(self.d.socket)
        self.assertEqual(mounts[sock_dir]["hostPath"], sock_dir)
        for m in mounts.values():
            self.assertIn("bind", m["options"])
        self.assertIn("ro", mounts[shim_in]["options"])
        # read-only: a container connects (test_connect_through_a_read_only_mount)
        # but cannot put a socket of its own in kairosd's place
        self.assertIn("ro", mounts[sock_dir]["options"])
        self.assertNotIn("rw", mounts[sock_dir]["options"])
        conf = mounts["/etc/kairos/shim.conf"]
        self.assertEqual(conf["hostPath"], os.path.join(os.path.dirname(preload), "shim.conf"))
        self.assertIn("ro", conf["options"])
        with open(conf["hostPath"]) as f:
            self.assertEqual(f.read().split("\n")[1:],
                             [f"socket: {self.d.socket}", "on_daemon_down: closed",
                              "register: always", ""])
        self.assertEqual(oct(os.stat(conf["hostPath"]).st_mode & 0o777), "0o644")
        with open(preload) as f:
            self.assertEqual(f.read(), shim_in + "\n")
        self.assertEqual(oct(os.stat(preload).st_mode & 0o777), "0o644")

    def test_connect_through_a_read_only_mount(self):
        # what the spec's read-only mount of the socket's directory gives a container:
        # kairosd answers, and nothing can be created there (a mount namespace of its own)
        sock_dir = os.path.dirname(self.d.socket)
        ro = os.path.join(self.d.dir, "ro")
        os.makedirs(ro, exist_ok=True)
        sock = os.path.join(ro, os.path.basename(self.d.socket))
        script = (f"mount --bind {sock_dir} {ro} && mount -o remount,bind,ro {ro} || exit 77; "
                  f"touch {ro}/x 2>/dev/null && exit 3; "
                  f"exec {sys.executable} -c 'import socket; "
                  f"s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); "
                  f"s.connect(\"{sock}\"); print(\"connected\")'")
        r = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True,
                           text=True, timeout=30)
        if r.returncode == 77 or "unshare failed" in r.stderr:
            self.skipTest("no mount namespace here (needs root): " + r.stderr.strip())
        self.assertEqual((r.returncode, r.stdout), (0, "connected\n"), r.stderr)

    def test_one_tenant_on_stdout(self):
        _, preload = self.paths("bob")
        r = self.kairos_cdi("--tenant", "bob", "--preload-file", preload)
        self.assertEqual(r.returncode, 0, r.stderr)
        spec = json.loads(r.stdout)
        self.assertEqual([d["name"] for d in spec["devices"]], ["bob"])
        self.assertEqual(list(self.schema.iter_errors(spec)), [])
        # nothing in it needs more than the oldest version runtimes read (Debian 12's
        # Podman refuses 0.6.0)
        self.assertEqual(spec["cdiVersion"], "0.3.0")

    def test_refusals_leave_no_spec(self):
        spec_path, preload = self.paths("refused")
        cases = [(("--tenant", "nobody"), "kairosd has no tenant 'nobody'", None),
                 (("--tenant", "trailing_"), "cannot be a CDI device", None),
                 ((), "kairosd is not running", "/nonexistent/kairosd.sock")]
        for args, message, socket in cases:
            r = self.kairos_cdi("--output", spec_path, "--preload-file", preload, *args,
                                socket=socket)
            self.assertEqual(r.returncode, 1, args)
            self.assertIn(message, r.stderr)
            self.assertFalse(os.path.exists(spec_path))
            self.assertFalse(os.path.exists(spec_path + ".tmp"))
        r = subprocess.run([KAIROS, "cdi", "--shim", "no/such/libkairos.so", "--socket",
                            self.d.socket], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertIn("--shim no/such/libkairos.so", r.stderr)
        self.assertEqual(subprocess.run([KAIROS, "cdi", "extra"], capture_output=True,
                                        timeout=30).returncode, 2)

    @unittest.skipIf(os.geteuid() != 0, "mknod of a character device needs root")
    def test_device_nodes_under_a_device_root(self):
        """--dev-root: every device node keeps its container path and takes its host
        path under the root (cdiVersion 0.5.0 brought hostPath); a root without the
        driver's control node is refused, with no specification left."""
        root = os.path.join(self.d.dir, "driver")
        os.makedirs(os.path.join(root, "dev"), exist_ok=True)
        spec_path, preload = self.paths("rooted")
        r = self.kairos_cdi("--output", spec_path, "--preload-file", preload, "--dev-root", root)
        self.assertEqual(r.returncode, 1)
        self.assertIn(f"--dev-root {root}: {root}/dev/nvidiactl: No such file", r.stderr)
        self.assertFalse(os.path.exists(spec_path))
        ctl = os.path.join(root, "dev", "nvidiactl")
        with open(ctl, "w"):
            pass
        r = self.kairos_cdi("--output", spec_path, "--preload-file", preload, "--dev-root", root)
        self.assertIn("not a character device", r.stderr)
        os.unlink(ctl)
        os.mknod(ctl, 0o666 | stat.S_IFCHR, os.makedev(195, 255))
        r = self.kairos_cdi("--output", spec_path, "--preload-file", preload, "--dev-root",
                            root + "/", "--tenant", "bob")
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(spec_path) as f:
            spec = json.load(f)
        self.assertEqual([e.message for e in self.schema.iter_errors(spec)], [])
        self.assertEqual(spec["cdiVersion"], "0.5.0")
        nodes = spec["containerEdits"]["deviceNodes"] + spec["devices"][0]["containerEdits"][
            "deviceNodes"]
        self.assertEqual([(n["path"], n["hostPath"]) for n in nodes],
                         [(p, root + p) for p in ("/dev/nvidiactl", "/dev/nvidia-uvm",
                                                  "/dev/nvidia1")])

    def test_the_schema_refuses_what_the_spec_forbids(self):
        _, preload = self.paths("good")
        good = json.loads(self.kairos_cdi("--preload-file", preload).stdout)
        bad = []
        for change in (lambda s: s.pop("cdiVersion"),
                       lambda s: s.__setitem__("kind", "tenant"),
                       lambda s: s["devices"][0].__setitem__("name", "trailing_"),
                       lambda s: s["devices"][0].__setitem__("nameShort", ["a"]),
                       lambda s: s["containerEdits"]["mounts"][0].pop("containerPath"),
                       lambda s: s["containerEdits"]["deviceNodes"][0].__setitem__("path",
                                                                                   "dev/x"),
                       lambda s: s.__setitem__("devices", [])):
            s = json.loads(json.dumps(good))
            change(s)
            bad.append(s)
        for s in bad:
            self.assertTrue(list(self.schema.iter_errors(s)), json.dumps(s)[:200])


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
