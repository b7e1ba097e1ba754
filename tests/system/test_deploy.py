#!/usr/bin/env python3
"""deploy/kubernetes: the manifests parse; the ConfigMap's kairosd.yaml is a valid
configuration (kairosd --check); the DaemonSet gives kairosd what docs/containers.md
says it needs (host pid namespace, privileged, hostPath /run/kairos, /var/lib/kairos
and /etc/cdi) and runs `kairos cdi` with options kairos has, writing where the
runtime reads; the example pod asks for a device of kairos's CDI kind.
Usage: test_deploy.py KAIROSD_BINARY KAIROS_BINARY SOURCE_ROOT"""
import os
import re
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import debian_python  # noqa: E402

debian_python.require("yaml")
import yaml  # noqa: E402

KAIROSD, KAIROS, ROOT = sys.argv[1], sys.argv[2], sys.argv[3]
K8S = os.path.join(ROOT, "deploy", "kubernetes")


def load(name):
    with open(os.path.join(K8S, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d]


class Kubernetes(unittest.TestCase):
    def test_configmap_is_a_valid_configuration(self):
        (cm,) = load("kairosd-config.yaml")
        self.assertEqual(cm["kind"], "ConfigMap")
        text = cm["data"]["kairosd.yaml"]
        self.assertIn("socket: /run/kairos/kairosd.sock", text)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "kairosd.yaml")
            with open(path, "w") as f:
                f.write(text)
            fake = os.path.join(d, "gpus.txt")  # a node's GPU, as NVML would show it
            with open(fake, "w") as f:
                f.write("gpu 0 GPU-fake-0000 85899345920\n")
            r = subprocess.run([KAIROSD, "-c", path, "--check", "--fake-gpu", fake],
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("2 tenant(s)", r.stderr)

    def test_daemonset_gives_kairosd_what_it_needs(self):
        docs = {d["kind"]: d for d in load("kairosd-daemonset.yaml")}
        ds = docs["DaemonSet"]
        pod = ds["spec"]["template"]["spec"]
        self.assertTrue(pod["hostPID"])
        host = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
        self.assertEqual(host, {"run": "/run/kairos", "state": "/var/lib/kairos",
                                "cdi": "/etc/cdi"})
        self.assertEqual([v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v],
                         ["kairosd-config"])
        containers = {c["name"]: c for c in pod["containers"]}
        kd = containers["kairosd"]
        self.assertTrue(kd["securityContext"]["privileged"])
        mounts = {m["mountPath"] for m in kd["volumeMounts"]}
        self.assertTrue({"/etc/kairos", "/run/kairos", "/var/lib/kairos"} <= mounts)
        cdi = " ".join(containers["cdi"]["command"])
        self.assertIn("--output /etc/cdi/kairos.json", cdi)
        helptext = subprocess.run([KAIROS, "cdi", "--help"], capture_output=True, text=True,
                                  timeout=30).stdout
        for option in re.findall(r"(--[a-z-]+)", cdi):
            self.assertIn(option, helptext)
        self.assertIn("/etc/cdi", {m["mountPath"] for m in containers["cdi"]["volumeMounts"]})

    def test_example_pod_requests_a_tenant(self):
        (pod,) = load("example-pod.yaml")
        value = pod["metadata"]["annotations"]["cdi.k8s.io/kairos"]
        self.assertRegex(value, r"^kairos\.dev/tenant=[A-Za-z0-9][-_.A-Za-z0-9]*$")


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
