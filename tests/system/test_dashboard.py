#!/usr/bin/env python3
"""The Grafana dashboard (deploy/grafana/) and docs/metrics.md against what kairosd
really exports: a kairosd with the fake GPU, a tenant with a compute policy and the
metrics endpoint is scraped, and every metric name in the dashboard's expressions
and variables must be one of its families, as must every metric docs/metrics.md
lists (and it must list them all). The dashboard's structure is checked too: the
panels the issue asks for, datasource and variables defined, no overlapping ids.
Usage: test_dashboard.py KAIROSD SOURCE_ROOT"""
import glob
import json
import os
import re
import sys
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from debian_python import require  # noqa: E402
from kairos_proto import Daemon  # noqa: E402
from harness import free_port  # noqa: E402

KAIROSD, ROOT = sys.argv[1:3]
NAME = re.compile(r"\bkairos_[a-z0-9_]+\b")
DASHBOARDS = sorted(glob.glob(os.path.join(ROOT, "deploy", "grafana", "*.json")))


def exported():
    """The metric families of a real scrape, by the names of their TYPE lines."""
    port = free_port()
    tenants = "  - name: team\n    memory: { 0: 1G }\n    compute: { 0: { share: 40%, limit: 80% } }\n"
    d = Daemon(KAIROSD, tenants_yaml=tenants, gpus=1,
               fake="gpu 0 GPU-0 1073741824\ndriver 580.159.04\n",
               extra=f"metrics: 127.0.0.1:{port}\n").start().wait_ready()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
    finally:
        d.stop()
    return set(re.findall(r"^# TYPE (\S+) ", text, re.M))


def strings(node):
    """Every string in a JSON document, with the key it is under."""
    if isinstance(node, dict):
        for k, v in node.items():
            if isinstance(v, str):
                yield k, v
            else:
                yield from strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from strings(v)


class Dashboard(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.families = exported()

    def test_the_scrape_has_the_families(self):
        self.assertIn("kairos_tenant_memory_held_bytes", self.families)
        self.assertIn("kairos_tenant_allocations_refused_total", self.families)
        self.assertGreater(len(self.families), 20)

    def test_every_metric_the_dashboards_use_is_exported(self):
        self.assertTrue(DASHBOARDS)
        for path in DASHBOARDS:
            with open(path) as f:
                dash = json.load(f)
            used = set()
            for key, text in strings(dash):
                if key in ("expr", "query", "definition"):
                    used |= set(NAME.findall(text))
                    self.assertEqual(text.count("("), text.count(")"), text)
                    self.assertEqual(text.count("{"), text.count("}"), text)
            self.assertTrue(used, path)
            self.assertEqual(used - self.families, set(), f"{path}: not exported by kairosd")
            # what the dashboard is for
            for name in ("kairos_tenant_compute_achieved_minute_ratio",
                         "kairos_tenant_compute_target_ratio",
                         "kairos_tenant_memory_held_bytes", "kairos_tenant_memory_quota_bytes",
                         "kairos_tenant_allocations_refused_total", "kairos_tenant_pauses_total"):
                self.assertIn(name, used, path)

    def test_the_dashboards_are_well_formed(self):
        for path in DASHBOARDS:
            with open(path) as f:
                dash = json.load(f)
            self.assertTrue(dash["uid"] and dash["title"], path)
            names = {v["name"] for v in dash["templating"]["list"]}
            ids = [p["id"] for p in dash["panels"]]
            self.assertEqual(len(ids), len(set(ids)), path)
            for p in dash["panels"]:
                g = p["gridPos"]
                self.assertLessEqual(g["x"] + g["w"], 24, p["title"])
                if p["type"] == "row":
                    continue
                self.assertEqual(p["datasource"]["uid"], "${datasource}", p["title"])
                self.assertTrue(p["targets"], p["title"])
                for t in p["targets"]:
                    for var in re.findall(r"\$(\w+)", t["expr"]):
                        self.assertTrue(var in names or var.startswith("__"), (p["title"], var))
            self.assertIn("datasource", names)


class Kubernetes(unittest.TestCase):
    def test_the_daemonset_exposes_the_configured_port(self):
        require("yaml")
        import yaml
        kdir = os.path.join(ROOT, "deploy", "kubernetes")
        with open(os.path.join(kdir, "kairosd-config.yaml")) as f:
            conf = yaml.safe_load(yaml.safe_load(f)["data"]["kairosd.yaml"])
        port = int(conf["metrics"].rsplit(":", 1)[1])
        with open(os.path.join(kdir, "kairosd-daemonset.yaml")) as f:
            ds = next(d for d in yaml.safe_load_all(f) if d["kind"] == "DaemonSet")
        pod = ds["spec"]["template"]
        kairosd = next(c for c in pod["spec"]["containers"] if c["name"] == "kairosd")
        self.assertIn({"name": "metrics", "containerPort": port, "protocol": "TCP"},
                      kairosd["ports"])
        notes = pod["metadata"]["annotations"]
        self.assertEqual(notes["prometheus.io/scrape"], "true")
        self.assertEqual(notes["prometheus.io/port"], str(port))


class Docs(unittest.TestCase):
    def test_docs_list_exactly_the_exported_families(self):
        families = exported()
        with open(os.path.join(ROOT, "docs", "metrics.md")) as f:
            text = f.read()
        listed = set(re.findall(r"^\| `(kairos_[a-z0-9_]+)`", text, re.M))
        self.assertEqual(listed - families, set(), "in docs/metrics.md, not exported")
        self.assertEqual(families - listed, set(), "exported, not in docs/metrics.md")


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
