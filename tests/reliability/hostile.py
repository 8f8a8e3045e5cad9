"""Running a hostile case in a child process: its source goes to a file (kernels are parsed from files), it
runs with a timeout, and the result comes back as (exit code, stdout, stderr). A hang or a crash fails
the one test instead of the whole session."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_child(source: str, tmp_path, *args: str, timeout: float = 120, env: dict | None = None):
    """Run `source` (dedented) as a script with `args`; subprocess.TimeoutExpired when it outlives `timeout`."""
    script = tmp_path / "hostile_case.py"
    script.write_text(textwrap.dedent(source))
    return subprocess.run([sys.executable, str(script), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=None if env is None else {**os.environ, **env})
