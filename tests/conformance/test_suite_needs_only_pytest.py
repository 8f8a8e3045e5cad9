"""The shipped conformance suite runs where only gradkit, its dependencies and pytest are installed: no
Hypothesis, SciPy, mpmath, torch, JAX or third-party pytest plugins (imports of those are made to fail in a
child process), and its command line reports the three outcomes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

BLOCKED = ("hypothesis", "scipy", "mpmath", "sympy", "torch", "jax", "jaxlib", "numba", "xdist", "pytest_xdist")

CHILD = textwrap.dedent("""
    import importlib.abc, sys
    BLOCKED = {blocked!r}

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"{{name}} is not installed here")
            return None

    sys.meta_path.insert(0, Block())
    from gradkit.conformance.__main__ import main
    code = main(["--device", "numpy", "-q", "-rs", "-k", "test_memory or test_native or test_threads or erf"])
    leaked = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
    print("LEAKED", leaked)
    sys.exit(code)
""")


def test_conformance_suite_runs_with_only_pytest(tmp_path):
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    done = subprocess.run([sys.executable, "-c", CHILD.format(blocked=BLOCKED)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert "LEAKED []" in out
    summary = [line for line in out.splitlines() if " passed" in line][-1]
    assert "failed" not in summary and "skipped" not in summary, summary     # numpy declares everything


def test_list_features_names_what_a_device_lacks(tmp_path):
    done = subprocess.run([sys.executable, "-m", "gradkit.conformance", "--list-features", "--device", "numpy"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("numpy\tcontract ")
    assert any(line.strip() == "not declared: -" for line in lines)
    assert any(line.strip().startswith("atomics:") and "xchg" in line for line in lines)
