"""The wheel as a user gets it (issue 25): built from the working tree, installed into a fresh virtual
environment in a temporary folder, and used from a folder outside the repository: a kernel and its
gradient against the analytic value, `gradkit --help`, `gradkit examples --bundle-only` finding the
examples shipped inside the package, and the plain (rich-less) messages naming the extra to install.

No network: the fresh venv gets the wheel (`pip install --no-deps`) and, for its declared runtime
dependencies only (numpy, llvmlite, platformdirs and what they require), links to the copies this test
environment already has. Optional extras (rich, streamlit, graphviz, torch) are deliberately absent, so
the messages a user without them sees are what is checked; `pip check` confirms the declared
dependencies are all there.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import pathlib
import re
import shutil
import subprocess
import sys
import venv
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _source_copy(dest: pathlib.Path) -> pathlib.Path:
    """The files a fresh clone of the working tree would have (tracked and new, not ignored), copied to
    `dest`, so the build sees no stale build/ folder and writes nothing into the checkout."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, check=False)
    if listed.returncode != 0:
        pytest.skip("git is needed to list the working tree's files")
    for rel in filter(None, listed.stdout.decode().split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def _runtime_requirements(dist: str, seen: set[str]) -> None:
    """`dist` and, recursively, every distribution its metadata requires without an extra."""
    key = re.sub(r"[-_.]+", "-", dist).lower()
    if key in seen:
        return
    seen.add(key)
    for req in md.requires(dist) or []:
        name, _, marker = req.partition(";")
        if "extra" in marker:
            continue
        if marker.strip():
            try:
                from packaging.markers import Marker
                if not Marker(marker.strip()).evaluate():
                    continue
            except ImportError:
                pass
        _runtime_requirements(re.split(r"[ <>=!~\[(]", name.strip(), maxsplit=1)[0], seen)


def _link_distribution(name: str, site: pathlib.Path) -> None:
    """Make the installed distribution `name` importable in `site` by linking its top-level entries."""
    dist = md.distribution(name)
    tops = set()
    for f in dist.files or []:
        parts = pathlib.PurePath(f).parts
        if parts and parts[0] not in ("..", "bin") and not parts[0].endswith(".pth"):
            tops.add(parts[0])
    base = pathlib.Path(dist.locate_file(""))
    for top in tops:
        target = base / top
        if target.exists() and not (site / top).exists():
            (site / top).symlink_to(target)


def _run(cmd, cwd, env, timeout=300):
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


CHECK_GRADIENT = """
import numpy as np
import gradkit as gk

@gk.kernel
def energy(x: gk.array(dtype=float), e: gk.array(dtype=float)):
    i = gk.tid()
    gk.atomic_add(e, 0, gk.sin(x[i]) * x[i])

xs = np.linspace(0.1, 2.0, 16).astype(np.float32)
x = gk.array(xs, requires_grad=True)
e = gk.zeros(1, requires_grad=True)
tape = gk.Tape()
with tape:
    gk.launch(energy, 16, inputs=[x], outputs=[e])
tape.backward(loss=e)
expected = np.cos(xs) * xs + np.sin(xs)          # d/dx x sin x
assert np.allclose(x.grad.numpy(), expected, rtol=1e-5, atol=1e-6), (x.grad.numpy(), expected)
assert abs(e.numpy()[0] - float(np.sum(np.sin(xs) * xs))) < 1e-4
print("gradient ok", gk.__version__, gk.__file__)
"""


def test_wheel_installs_and_runs_outside_the_repository(tmp_path):
    src = _source_copy(tmp_path / "src")
    wheels = tmp_path / "wheels"
    rc, out, err = _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                         "--disable-pip-version-check", "-w", str(wheels), str(src)], tmp_path, None)
    assert rc == 0, err
    (wheel,) = wheels.glob("gradkit-*.whl")
    import gradkit
    assert wheel.name.startswith(f"gradkit-{gradkit.__version__}-"), wheel.name   # one version number

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, symlinks=True).create(env_dir)
    py = env_dir / "bin" / "python"
    site = pathlib.Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                       capture_output=True, text=True, check=True).stdout.strip())
    needed: set[str] = set()
    with zipfile.ZipFile(wheel) as zf:           # what the wheel declares, not the editable install's metadata
        meta = zf.read(f"gradkit-{gradkit.__version__}.dist-info/METADATA").decode()
    for req in re.findall(r"^Requires-Dist: (.*)$", meta, re.M):
        name, _, marker = req.partition(";")
        if "extra" not in marker:
            _runtime_requirements(re.split(r"[ <>=!~\[(]", name.strip(), maxsplit=1)[0], needed)
    needed.discard("gradkit")
    assert {"numpy", "llvmlite", "platformdirs"} <= needed
    for name in needed:
        _link_distribution(name, site)

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "PIP_"))}
    env.update(PATH=f"{env_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}", PIP_NO_INDEX="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1", GRADKIT_CACHE_DIR=str(tmp_path / "cache"),
               XDG_CACHE_HOME=str(tmp_path / "xdg-cache"))
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    rc, out, err = _run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel)], outside, env)
    assert rc == 0, err
    rc, out, err = _run([str(py), "-m", "pip", "check"], outside, env)
    assert rc == 0, out + err                         # the declared dependencies are all there

    # a kernel and its gradient, from the installed package (not the checkout)
    (outside / "check_gradient.py").write_text(CHECK_GRADIENT)
    rc, out, err = _run([str(py), "check_gradient.py"], outside, env)
    assert rc == 0, err
    assert "gradient ok" in out and str(site) in out and str(ROOT) not in out

    gradkit_cli = str(env_dir / "bin" / "gradkit")
    rc, out, err = _run([gradkit_cli, "--help"], outside, env)
    assert rc == 0 and all(c in out for c in ("debug", "open", "examples")), out + err

    # the shipped examples, captured without Streamlit (not installed here) and without rich
    bundles = tmp_path / "bundles"
    rc, out, err = _run([gradkit_cli, "examples", "--bundle-only", "--out", str(bundles)], outside, env)
    assert rc == 0, out + err
    shipped = sorted(p.name for p in (site / "gradkit" / "examples").glob("*.py"))
    assert "quickstart.py" in shipped and len(shipped) >= 8
    for name in shipped:
        assert f"capturing {name}" in err, err           # each shipped example was found and run
    ok = [name for name in shipped if f"{name}: ok" in err]
    assert "quickstart.py" in ok and len(ok) >= len(shipped) - 1, err   # torch_ddp_springs needs torch
    assert (bundles / "quickstart").is_dir()
    assert "[/" not in err and "[red]" not in err and "[green]" not in err      # no raw rich markup

    # no Streamlit: a clear message naming the extra, before any work, and no markup
    rc, out, err = _run([gradkit_cli, "open", "--no-browser", str(bundles)], outside, env)
    assert rc == 1 and "pip install 'gradkit[app]'" in err and "[red]" not in err, err
