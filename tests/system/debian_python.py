"""A system test that needs a Python module Debian packages (python3-jsonschema,
python3-yaml: scripts/install-deps installs them) calls require() first: when the
python3 running it lacks the module (another interpreter first on PATH), the test
starts again under Debian's /usr/bin/python3."""
import importlib
import os
import sys


def require(*modules):
    try:
        for name in modules:
            importlib.import_module(name)
    except ImportError:
        if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3"):
            os.execv("/usr/bin/python3", ["/usr/bin/python3", *sys.argv])
        raise
