#!/usr/bin/env python3
"""The node image (deploy/kubernetes/Dockerfile) built as its comment says, from the
package scripts/build-deb wrote, and its DaemonSet's containers
(deploy/kubernetes/kairosd-daemonset.yaml) played with Podman, each with the command,
mounts and read-only root the manifest gives it:
  install-shim  copies the package's shim into the state folder and exits 0;
  kairosd       started by its command with the ConfigMap's kairosd.yaml
                (deploy/kubernetes/kairosd-config.yaml) and a fake GPU, answers its
                readiness probe (kairos ps --json: the ConfigMap's tenants) and stops
                at SIGTERM with status 0;
  cdi           writes the CDI specification of those tenants, naming the shim the
                first container installed.
No registry is reachable here, so the Dockerfile's base (debian:12.8-slim) is
replaced by a Debian 12 of debootstrap's making (podman build --from); everything
else, the package's dependencies from Debian's mirror included, is as written.
Needs root, podman, runc and debootstrap (scripts/install-deps --test); run by
scripts/test after the package is built.
Usage: test_node_image.py KAIROS_DEB"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import wait_value  # noqa: E402

import yaml  # noqa: E402

DEB = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else ""
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
K8S = os.path.join(ROOT, "deploy", "kubernetes")
# as tests/system/test_podman.py: runc, limits an unprivileged sandbox lets it set
PODMAN = ["podman", "--runtime", "runc"]
LIMITS = ["--network", "none", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]
FAKE_GPU = "gpu 0 GPU-fake-0000 85899345920\n"


def missing():
    """Why this machine cannot build and run the image, or None."""
    if os.geteuid() != 0:
        return "needs root (Podman's rootful storage, debootstrap)"
    for tool in ("podman", "runc", "debootstrap"):
        if not shutil.which(tool):
            return f"no {tool} (scripts/install-deps --test installs it)"
    if not os.path.isfile(DEB):
        return f"no package at '{DEB}' (scripts/build-deb writes it)"
    return None


def podman(*args, timeout=300):
    return subprocess.run(PODMAN + list(args), capture_output=True, text=True,
                          timeout=timeout)


def json_file(path):
    """The JSON document at path, or None while it is missing or half written."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def manifest():
    """The DaemonSet's containers by name (init containers included), and the
    ConfigMap's kairosd.yaml."""
    with open(os.path.join(K8S, "kairosd-daemonset.yaml")) as f:
        docs = [d for d in yaml.safe_load_all(f) if d and d.get("kind") == "DaemonSet"]
    pod = docs[0]["spec"]["template"]["spec"]
    containers = {c["name"]: c for c in pod["initContainers"] + pod["containers"]}
    with open(os.path.join(K8S, "kairosd-config.yaml")) as f:
        config = next(d for d in yaml.safe_load_all(f) if d and d.get("kind") == "ConfigMap")
    return containers, config["data"]["kairosd.yaml"]


@unittest.skipIf(missing(), missing())
class NodeImage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kairos-node-image-")
        pid = os.getpid()
        cls.base, cls.image = f"localhost/kairos-base-{pid}:12", f"localhost/kairos-node-{pid}:1"
        cls.containers, cls.config = manifest()
        try:
            cls.build()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def build(cls):
        rootfs = os.path.join(cls.tmp, "rootfs")
        r = subprocess.run(["debootstrap", "--variant=minbase", "bookworm", rootfs],
                           capture_output=True, text=True, timeout=900)
        if r.returncode:
            raise AssertionError(f"debootstrap: {r.stdout[-800:]}{r.stderr[-800:]}")
        tar = subprocess.Popen(["tar", "-C", rootfs, "-c", "."], stdout=subprocess.PIPE)
        r = subprocess.run(PODMAN + ["import", "-", cls.base], stdin=tar.stdout,
                           capture_output=True, text=True, timeout=300)
        tar.stdout.close()
        tar.wait()
        if r.returncode:
            raise AssertionError(f"podman import: {r.stderr}")
        context = os.path.join(cls.tmp, "context")
        os.makedirs(context)
        shutil.copy(os.path.join(K8S, "Dockerfile"), context)
        shutil.copy(DEB, context)  # "copied next to this file", as the Dockerfile says
        r = podman("build", "--from", cls.base, "-t", cls.image, context, timeout=900)
        if r.returncode:
            raise AssertionError(f"podman build: {r.stdout[-1500:]}{r.stderr[-1500:]}")

    @classmethod
    def tearDownClass(cls):
        podman("rm", "-f", "-a", "--filter", f"label=kairos-test={os.getpid()}")
        for image in (getattr(cls, "image", None), getattr(cls, "base", None)):
            if image:
                podman("rmi", "-f", image)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def folder(self, name, text=None):
        """A host folder standing in for a volume (with kairosd.yaml where text is)."""
        path = os.path.join(self.tmp, self.id().rsplit(".", 1)[-1], name)
        os.makedirs(path, exist_ok=True)
        if text is not None:
            with open(os.path.join(path, "kairosd.yaml"), "w") as f:
                f.write(text)
        return path

    def run_container(self, name, volumes, *extra, detach=False):
        """The manifest's container name with its command, its mounts at volumes
        (mount path -> host folder) and, where the manifest says so, a read-only root."""
        c = self.containers[name]
        args = ["run", "--label", f"kairos-test={os.getpid()}", *LIMITS]
        if c.get("securityContext", {}).get("readOnlyRootFilesystem"):
            args.append("--read-only")
        for m in c.get("volumeMounts", []):
            ro = ",ro" if m.get("readOnly") else ""
            args += ["-v", f"{volumes[m['mountPath']]}:{m['mountPath']}:Z{ro}"]
        args += list(extra)
        args += ["-d"] if detach else ["--rm"]
        args += ["--entrypoint", c["command"][0], self.image, *c["command"][1:]]
        return podman(*args, timeout=120)

    def test_the_pods_containers_run_as_the_manifest_says(self):
        state, run, cdi = self.folder("state"), self.folder("run"), self.folder("cdi")
        config = self.folder("config", self.config)
        with open(os.path.join(config, "fake-gpu"), "w") as f:
            f.write(FAKE_GPU)
        r = self.run_container("install-shim", {"/var/lib/kairos": state})
        self.assertEqual(r.returncode, 0, r.stderr)
        shim = os.path.join(state, "lib", "libkairos.so")
        with open(shim, "rb") as f:
            self.assertEqual(f.read(4), b"\x7fELF")

        volumes = {"/etc/kairos": config, "/run/kairos": run, "/var/lib/kairos": state,
                   "/etc/cdi": cdi}
        r = self.run_container("kairosd", volumes, "--env",
                               "KAIROS_FAKE_GPU=/etc/kairos/fake-gpu", detach=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        kairosd = r.stdout.strip()
        probe = self.containers["kairosd"]["readinessProbe"]["exec"]["command"]

        def ready():
            p = podman("exec", kairosd, *probe, timeout=60)
            return json.loads(p.stdout) if p.returncode == 0 else None
        ps = wait_value(ready, "kairosd in the image to answer its readiness probe", timeout=60)
        names = {t["name"] for t in ps["tenants"]}
        self.assertTrue({"training", "inference"} <= names, names)

        r = self.run_container("cdi", volumes, detach=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        spec_path = os.path.join(cdi, "kairos.json")
        spec = wait_value(lambda: json_file(spec_path), "the cdi container's specification",
                          timeout=60)
        self.assertEqual(spec["kind"], "kairos.dev/tenant")
        self.assertTrue({"training", "inference"} <= {d["name"] for d in spec["devices"]})
        self.assertIn("/var/lib/kairos/lib/libkairos.so", json.dumps(spec))

        r = podman("stop", "-t", "20", kairosd, timeout=60)  # SIGTERM, as the kubelet
        self.assertEqual(r.returncode, 0, r.stderr)
        r = podman("inspect", "--format", "{{.State.ExitCode}}", kairosd, timeout=60)
        self.assertEqual(r.stdout.strip(), "0", podman("logs", kairosd).stderr[-1500:])


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
