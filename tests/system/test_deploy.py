#!/usr/bin/env python3
"""deploy/kubernetes: the manifests parse and have the structure the API server
requires of their kinds (apiVersion/kind, names, containers with images, the
DaemonSet's selector, volumes that mounts name: no kubeconform or python3-kubernetes
in Debian 12, so checked here); the ConfigMap's kairosd.yaml is a valid configuration
(kairosd --check) with no administrator a pod could be (no admins, pods' cgroups
unprivileged); no container outside the kairosd DaemonSet runs as root, privileged
or able to gain privileges; the DaemonSet gives kairosd what docs/containers.md says
it needs (host pid namespace, privileged, hostPath /run/kairos, /var/lib/kairos and
/etc/cdi) and runs `kairos cdi` with options kairos has, writing where the runtime
reads; the example pod asks for a device of kairos's CDI kind and, in a kairosd
running the ConfigMap's tenants, a process with its uid joins that tenant and is
refused the other; the Dockerfile is checked statically (pinned Debian 12 base, the
.deb installed with apt, nothing piped to a shell, root explained).
Usage: test_deploy.py KAIROSD_BINARY KAIROS_BINARY SOURCE_ROOT"""
import os
import re
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import debian_python  # noqa: E402
import kairos_proto as kp  # noqa: E402

debian_python.require("yaml")
import yaml  # noqa: E402

KAIROSD, KAIROS, ROOT = sys.argv[1], sys.argv[2], sys.argv[3]
K8S = os.path.join(ROOT, "deploy", "kubernetes")


def load(name):
    with open(os.path.join(K8S, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def manifests():
    return [d for name in sorted(os.listdir(K8S)) if name.endswith(".yaml")
            for d in load(name)]


def kairosd_config():
    (cm,) = load("kairosd-config.yaml")
    return yaml.safe_load(cm["data"]["kairosd.yaml"])


NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
API = {"Namespace": "v1", "ConfigMap": "v1", "Pod": "v1", "DaemonSet": "apps/v1"}


def pod_specs(doc):
    """(where, pod spec) of a Pod or a workload's template."""
    if doc["kind"] == "Pod":
        return [(doc["metadata"]["name"], doc["spec"])]
    if doc["kind"] == "DaemonSet":
        return [(doc["metadata"]["name"], doc["spec"]["template"]["spec"])]
    return []


def containers(spec):
    return spec.get("initContainers", []) + spec["containers"]


def in_child_as(uid, fn):
    """fn() in a forked child running as uid (root needed); its result as a string,
    or 'refused: CODE MESSAGE'."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            try:
                out = str(fn())
            except kp.KairosError as e:
                out = f"refused: {e.code} {e.message}"
            os.write(w, out.encode())
        finally:
            os._exit(0)
    os.close(w)
    out = b""
    while chunk := os.read(r, 65536):
        out += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return out.decode()


class Kubernetes(unittest.TestCase):
    def test_manifests_have_the_structure_of_their_kinds(self):
        docs = manifests()
        self.assertEqual(sorted({d["kind"] for d in docs}),
                         ["ConfigMap", "DaemonSet", "Namespace", "Pod"])
        for d in docs:
            where = f"{d['kind']} {d.get('metadata', {}).get('name')}"
            self.assertEqual(d["apiVersion"], API[d["kind"]], where)
            self.assertRegex(d["metadata"]["name"], NAME, where)
            if d["kind"] in ("ConfigMap", "DaemonSet"):
                self.assertEqual(d["metadata"]["namespace"], "kairos", where)
            if d["kind"] == "ConfigMap":
                self.assertTrue(all(isinstance(v, str) for v in d["data"].values()), where)
            if d["kind"] == "DaemonSet":
                labels = d["spec"]["template"]["metadata"]["labels"]
                for k, v in d["spec"]["selector"]["matchLabels"].items():
                    self.assertEqual(labels.get(k), v, f"{where}: selector {k}")
        specs = [ps for d in docs for ps in pod_specs(d)]
        self.assertEqual(len(specs), 2)
        for where, spec in specs:
            self.assertTrue(spec["containers"], where)
            volumes = {v["name"] for v in spec.get("volumes", [])}
            names = [c["name"] for c in containers(spec)]
            self.assertEqual(len(names), len(set(names)), where)
            for c in containers(spec):
                self.assertRegex(c["name"], NAME, where)
                self.assertTrue(c["image"], f"{where}/{c['name']}: no image")
                self.assertNotRegex(c["image"], r":latest$|^[^:]+$",
                                    f"{where}/{c['name']}: image not pinned by tag")
                for m in c.get("volumeMounts", []):
                    self.assertIn(m["name"], volumes, f"{where}/{c['name']}")
                    self.assertTrue(m["mountPath"].startswith("/"), f"{where}/{c['name']}")

    def test_no_pod_but_kairosd_runs_as_root_or_privileged(self):
        for d in manifests():
            for where, spec in pod_specs(d):
                if d["kind"] == "DaemonSet" and where == "kairosd":
                    # the only privileged container is kairosd itself
                    priv = [c["name"] for c in containers(spec)
                            if c.get("securityContext", {}).get("privileged")]
                    self.assertEqual(priv, ["kairosd"])
                    continue
                pod_sc = spec.get("securityContext", {})
                self.assertFalse(spec.get("hostPID") or spec.get("hostNetwork") or
                                 spec.get("hostIPC"), where)
                self.assertFalse([v for v in spec.get("volumes", []) if "hostPath" in v],
                                 f"{where}: hostPath (the socket comes from the CDI spec)")
                for c in containers(spec):
                    sc = {**pod_sc, **c.get("securityContext", {})}
                    what = f"{where}/{c['name']}"
                    self.assertIs(sc.get("runAsNonRoot"), True, what)
                    self.assertGreater(sc.get("runAsUser", 0), 0, what)
                    self.assertIs(sc.get("allowPrivilegeEscalation"), False, what)
                    self.assertFalse(sc.get("privileged"), what)
                    self.assertIs(sc.get("readOnlyRootFilesystem"), True, what)
                    self.assertIn("ALL", sc.get("capabilities", {}).get("drop", []), what)

    def test_configmap_has_no_administrator_a_pod_could_be(self):
        cfg = kairosd_config()
        self.assertEqual(cfg["admins"], [])
        # root (uid 0) is an administrator unless its cgroup is unprivileged: every
        # pod's cgroup, under the systemd and the cgroupfs kubelet drivers
        self.assertEqual(cfg["unprivileged_cgroups"], ["/kubepods.slice", "/kubepods"])
        for t in cfg["tenants"]:
            self.assertNotIn(0, t["members"].get("users", []), t["name"])
            self.assertNotIn(0, t["members"].get("groups", []), t["name"])

    def test_a_pod_joins_its_own_tenant_only(self):
        if os.getuid() != 0:
            self.skipTest("runs processes as the pods' uids: needs root")
        cfg = kairosd_config()
        (pod,) = load("example-pod.yaml")
        uid = pod["spec"]["securityContext"]["runAsUser"]
        mine = pod["metadata"]["annotations"]["cdi.k8s.io/kairos"].split("=", 1)[1]
        others = [t["name"] for t in cfg["tenants"] if t["name"] != mine]
        self.assertTrue(others)
        tenants = yaml.safe_dump(cfg["tenants"], default_flow_style=None)
        extra = "unprivileged_cgroups: " + yaml.safe_dump(
            cfg["unprivileged_cgroups"], default_flow_style=True)
        d = kp.Daemon(KAIROSD, tenants_yaml="\n".join("  " + line for line in
                                                      tenants.splitlines()),
                      gpus=1, fake="gpu 0 GPU-fake-0000 85899345920\n", extra=extra).start()
        self.addCleanup(d.stop)
        joined = in_child_as(uid, lambda: kp.Client(d.socket).hello(mine)[1][0])
        self.assertEqual(joined, str(40 << 30))  # training's quota: it joined
        for other in others:
            answer = in_child_as(uid, lambda: kp.Client(d.socket).hello(other))
            self.assertIn(f"refused: {kp.ERR_PERMISSION}", answer)
            self.assertIn(f"does not admit uid {uid}", answer)
        # and it administers nothing
        answer = in_child_as(uid, lambda: kp.Client(d.socket).tenant_set(mine, [80 << 30]))
        self.assertIn(f"refused: {kp.ERR_PERMISSION}", answer)

    def test_dockerfile_installs_the_package_on_pinned_debian_12(self):
        with open(os.path.join(K8S, "Dockerfile")) as f:
            text = f.read()
        lines = [ln for ln in text.replace("\\\n", " ").splitlines()
                 if ln.strip() and not ln.lstrip().startswith("#")]
        froms = [ln.split()[1] for ln in lines if ln.startswith("FROM ")]
        self.assertEqual(len(froms), 1)
        self.assertRegex(froms[0], r"^debian:12(\.[0-9]+)*(-slim)?$")  # a tag, never latest
        self.assertTrue(any(re.match(r"COPY kairos_\*\.deb ", ln) for ln in lines))
        run = " ".join(ln for ln in lines if ln.startswith("RUN "))
        self.assertRegex(run, r"apt-get install -y --no-install-recommends /tmp/kairos_\*\.deb")
        self.assertNotRegex(text, r"(curl|wget)[^\n|]*\|\s*(ba)?sh")
        self.assertNotRegex(run, r"\b(curl|wget|dpkg -i)\b")
        users = [ln.split()[1] for ln in lines if ln.startswith("USER ")]
        if not users or users[-1] in ("root", "0"):
            self.assertRegex(text, r"#[^\n]*runs as root, on purpose")
        self.assertIn("kairosd", " ".join(ln for ln in lines if ln.startswith("ENTRYPOINT")))

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
        images = {c["image"] for c in pod["initContainers"] + pod["containers"]}
        self.assertEqual(len(images), 1, images)  # one image, built from the Dockerfile
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
