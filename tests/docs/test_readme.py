"""The README is what a user reads in the first five minutes (issue 44 item 4): short, the two commands
first, its example runs and prints what its comment says, and every file it links exists."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np

from . import snippets

ROOT = snippets.ROOT
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _fences(lang: str) -> list[str]:
    return [code for fence_lang, _, code, _ in snippets.gradkit_docs.python_fences(README) if fence_lang == lang]


def test_readme_is_short_and_starts_with_the_two_commands():
    assert len(README.splitlines()) < 120
    first = _fences("bash")[0].splitlines()
    assert [line.split("#")[0].strip() for line in first[:2]] == ["make demo", "make test"]
    assert README.index("make demo") < README.index("```python")      # before any code
    assert "(CONTRIBUTING.md)" in README


def test_readme_example_prints_the_gradient_its_comment_names(tmp_path):
    script = tmp_path / "readme_example.py"            # kernels are read from their file
    script.write_text(_fences("python")[0], encoding="utf-8")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    grad = np.array(run.stdout.replace("[", " ").replace("]", " ").split(), dtype=np.float64)
    x = np.linspace(0, 1, 16).astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(grad, 2 * np.cos(x), rtol=1e-5)    # d/dx sum(2 sin x) = 2 cos x


def test_readme_links_exist():
    targets = [t for t in re.findall(r"\]\(([^)\s]+)\)", README) if not t.startswith(("http://", "https://"))]
    assert targets
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert not missing, missing
