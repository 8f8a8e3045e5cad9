"""Hostile debug bundles: each is opened in a child process with a timeout and must end in a `BundleError`
naming the file or manifest field (never a hang, a memory blow-up or a traceback); a bundle whose kernel
file is a script that would leave a marker if run never runs it, and gradcheck compiles only the source
stored in the bundle, after the user approved its SHA-256.
"""

from __future__ import annotations

import io
import json
import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import gradkit as gk
from tests.app.recording import record_bundle

ROOT = pathlib.Path(__file__).resolve().parents[2]
TIMEOUT = 60

OPEN = """
import json, sys
from gradkit.viz.bundle import BundleError, BundleLimits, load_bundle
limits = BundleLimits(**json.loads(sys.argv[2])) if len(sys.argv) > 2 else None
try:
    b = load_bundle(sys.argv[1], limits)
except BundleError as exc:
    print("BundleError:", exc)
    sys.exit(3)
print("loaded", len(b.arrays))
"""


def open_in_child(path, limits: dict | None = None) -> subprocess.CompletedProcess:
    """`load_bundle(path)` in a child process; subprocess.TimeoutExpired (a test failure) if it hangs."""
    args = [str(path)] + ([json.dumps(limits)] if limits else [])
    return subprocess.run([sys.executable, "-c", OPEN, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=TIMEOUT)


def refused(path, *needles: str, limits: dict | None = None) -> str:
    r = open_in_child(path, limits)
    assert r.returncode == 3 and r.stdout.startswith("BundleError:"), (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    for needle in needles:
        assert needle in r.stdout, r.stdout
    return r.stdout


@gk.kernel
def smooth(x: gk.array(dtype=float), s: float, y: gk.array(dtype=float)):
    i = gk.tid()
    v = x[i]
    y[i] = s * v * v + gk.sin(v)


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> pathlib.Path:
    """A valid bundle folder (snapshots on, one forward and one backward launch)."""
    path = tmp_path_factory.mktemp("good") / "bundle"
    x = gk.array(np.linspace(-1, 1, 8, dtype=np.float32), requires_grad=True, label="x")
    y = gk.zeros(8, requires_grad=True, label="y")
    return record_bundle(path, smooth, [x, 1.5], [y], seed=True)


def copy_of(good: pathlib.Path, tmp_path: pathlib.Path) -> pathlib.Path:
    dst = tmp_path / "bundle"
    shutil.copytree(good, dst)
    return dst


def test_the_good_bundle_loads(good):
    r = open_in_child(good)
    assert r.returncode == 0 and r.stdout.startswith("loaded"), r.stdout + r.stderr


# Files that are not regular, or not inside the bundle ------------------------------------------------------
@pytest.mark.parametrize("name", ["manifest.json", "arrays.npz"])
def test_a_fifo_does_not_hang(good, tmp_path, name):
    b = copy_of(good, tmp_path)
    (b / name).unlink()
    os.mkfifo(b / name)
    refused(b, f"{name}: is a FIFO, not a regular file")


def test_arrays_linked_to_dev_zero(good, tmp_path):
    b = copy_of(good, tmp_path)
    (b / "arrays.npz").unlink()
    (b / "arrays.npz").symlink_to("/dev/zero")
    refused(b, "arrays.npz: is a symbolic link leaving the bundle (to /dev/zero)")


def test_a_link_chain_ending_outside_is_refused(good, tmp_path):
    """arrays.npz -> inner (inside the bundle) -> /dev/zero: where the chain ends decides."""
    b = copy_of(good, tmp_path)
    (b / "inner").symlink_to("/dev/zero")
    (b / "arrays.npz").unlink()
    (b / "arrays.npz").symlink_to("inner")
    refused(b, "arrays.npz: is a symbolic link leaving the bundle")


def test_a_symlink_leaving_the_bundle(good, tmp_path):
    b = copy_of(good, tmp_path)
    outside = tmp_path / "elsewhere.json"
    shutil.move(b / "manifest.json", outside)
    (b / "manifest.json").symlink_to(outside)
    refused(b, "manifest.json: is a symbolic link leaving the bundle")


def test_a_symlink_inside_the_bundle_is_followed(good, tmp_path):
    b = copy_of(good, tmp_path)
    (b / "data").mkdir()
    shutil.move(b / "arrays.npz", b / "data" / "arrays.npz")
    (b / "arrays.npz").symlink_to(pathlib.Path("data") / "arrays.npz")
    assert open_in_child(b).returncode == 0


def test_a_device_as_the_bundle_is_refused():
    refused("/dev/zero", "not a gradkit debug bundle")


# Sizes: declared and actual, and the compression ratio ----------------------------------------------------
def _zero_npy_member(z: zipfile.ZipFile, name: str, count: int) -> None:
    """A float32 .npy of `count` zeros written in chunks (never the whole buffer in memory)."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (count,)})
    chunk = bytes(16 << 20)
    left = count * 4
    with z.open(name, "w", force_zip64=True) as f:
        f.write(header.getvalue())
        while left:
            f.write(chunk[:min(left, len(chunk))])
            left -= min(left, len(chunk))


def _bomb_bundle(good: pathlib.Path, tmp_path: pathlib.Path, count: int) -> pathlib.Path:
    b = copy_of(good, tmp_path)
    m = json.loads((b / "manifest.json").read_text())
    aid = m["arrays"][0]["id"]
    m["arrays"][0]["shape"] = [count]
    (b / "manifest.json").write_text(json.dumps(m))
    with zipfile.ZipFile(b / "arrays.npz", "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        _zero_npy_member(z, f"value/{aid}.npy", count)
    return b


def test_a_small_npz_inflating_to_1_1_gb_is_refused_before_reading(good, tmp_path):
    b = _bomb_bundle(good, tmp_path, 275_000_000)                       # 1.1 GB of float32 zeros
    assert (b / "arrays.npz").stat().st_size < 8 << 20
    refused(b, "arrays.npz member 'value/", "over the 200:1 compression-ratio cap")


def test_the_bomb_inside_a_zip_bundle_is_refused(good, tmp_path):
    folder = _bomb_bundle(good, tmp_path, 275_000_000)
    with zipfile.ZipFile(tmp_path / "b.zip", "w", zipfile.ZIP_STORED) as z:
        z.write(folder / "manifest.json", "manifest.json")
        z.write(folder / "arrays.npz", "arrays.npz")
    refused(tmp_path / "b.zip", "arrays.npz member 'value/", "compression-ratio cap")


def test_a_zip_member_over_the_manifest_cap_is_refused(tmp_path):
    with zipfile.ZipFile(tmp_path / "b.zip", "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        with z.open("manifest.json", "w") as f:
            f.write(b"{" + b" " * (65 << 20) + b"}")
        z.writestr("arrays.npz", b"")
    refused(tmp_path / "b.zip", "b.zip:manifest.json: declares", "over the 67108864-byte cap")


def test_caps_are_configurable(good, tmp_path):
    """The same bundle loads under the defaults and is refused under smaller caps (passed to load_bundle)."""
    refused(good, "manifest.json", "over the 100-byte cap", limits={"manifest_bytes": 100})
    refused(good, "arrays.npz", "over the 64-byte cap", limits={"arrays_bytes": 64})
    b = _bomb_bundle(good, tmp_path, 4_000_000)                          # 16 MB of zeros: legal by default
    assert open_in_child(b).returncode == 0
    refused(b, "compression-ratio cap", limits={"ratio_floor": 1 << 20})


def test_an_npy_header_that_lies_about_its_size(good, tmp_path):
    b = copy_of(good, tmp_path)
    m = json.loads((b / "manifest.json").read_text())
    aid = m["arrays"][0]["id"]
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (10**12,)})
    with zipfile.ZipFile(b / "arrays.npz", "w") as z:
        z.writestr(f"value/{aid}.npy", header.getvalue() + bytes(32))
    refused(b, f"value/{aid}.npy", "header declares 4000000000000 bytes")


def test_an_object_array_is_refused_not_unpickled(good, tmp_path):
    b = copy_of(good, tmp_path)
    aid = json.loads((b / "manifest.json").read_text())["arrays"][0]["id"]
    buf = io.BytesIO()
    np.savez(buf, **{f"value/{aid}": np.array([{"a": 1}] * 8, dtype=object)})
    (b / "arrays.npz").write_bytes(buf.getvalue())
    refused(b, f"value/{aid}.npy", "not a plain numeric dtype")


# The manifest's schema ------------------------------------------------------------------------------------
def _set(path: str, value):
    def edit(m):
        *parents, last = _steps(m, path)
        target = m
        for p in parents:
            target = target[p]
        if value is DELETE:
            del target[last]
        else:
            target[last] = value
    return edit


def _steps(m, path: str) -> list:
    steps = []
    for part in path.split("."):
        name, _, rest = part.partition("[")
        if name:
            steps.append(name)
        for index in filter(None, rest.replace("]", "").split("[")):
            steps.append(int(index))
    return [s if s != "KERNEL" else next(iter(m["kernels"])) for s in steps]


DELETE = object()
SCHEMA_CASES = {
    "missing launches[0].kernel": (_set("launches[0].kernel", DELETE), "launches[0].kernel: missing"),
    "unknown array in launches[0].arrays[2]": (_set("launches[0].arrays[2]", "a0"),
                                                "launches[0].arrays[2]: names array 'a0'"),
    "dim as a string": (_set("launches[0].dim", "8"), "launches[0].dim: expected a list, got a string"),
    "negative shape": (_set("arrays[0].shape[0]", -1), "arrays[0].shape[0]: -1 is out of range"),
    "first_line as a string": (_set("kernels.KERNEL.first_line", "9"),
                               "kernels.smooth.first_line: expected an integer or null"),
    "no graph": (_set("graph", DELETE), "graph: missing"),
    "backward record out of range": (_set("backward[0].record", 7), "backward[0].record: 7 is out of range"),
    "nan launch out of range": (_set("nan", {"direction": "forward", "launch": 5}), "nan.launch: 5"),
    "n_inputs past params": (_set("launches[0].n_inputs", 9), "launches[0].n_inputs: 9 is out of range"),
    "launch of an unknown kernel": (_set("launches[0].kernel", "ghost"),
                                    "launches[0].kernel: names kernel 'ghost'"),
    "requires_grad as a string": (_set("arrays[1].requires_grad", "yes"),
                                  "arrays[1].requires_grad: expected true"),
    "unknown field": (_set("launches[0].run_this", "import os"), "launches[0].run_this: unknown field"),
    "stats of an unknown parameter": (_set("launches[0].stats.before.ghost", {}),
                                      "launches[0].stats.before.ghost: unknown field"),
    "scalar of an array parameter": (_set("launches[0].scalars[0]", 1.0),
                                     "launches[0].scalars[0]: must be null"),
    "edited source": (_set("kernels.KERNEL.python_source", "def smooth(): pass\n"),
                      "kernels.smooth.source_sha256: does not match the stored python_source"),
    "pass logs as a list": (_set("kernels.KERNEL.passes", []),
                            "kernels.smooth.passes: expected an object, got a list"),
    "pass log text not a string": (_set("kernels.KERNEL.passes.adjoint[0][1]", 0),
                                   "kernels.smooth.passes.adjoint[0][1]: expected a string"),
    "empty manifest": (lambda m: m.clear(), "unsupported bundle schema None"),
}


@pytest.mark.parametrize("case", list(SCHEMA_CASES))
def test_manifest_schema_violations_name_the_field(good, tmp_path, case):
    edit, needle = SCHEMA_CASES[case]
    b = copy_of(good, tmp_path)
    m = json.loads((b / "manifest.json").read_text())
    edit(m)
    (b / "manifest.json").write_text(json.dumps(m))
    refused(b, needle)


def test_a_manifest_that_is_not_an_object(good, tmp_path):
    b = copy_of(good, tmp_path)
    (b / "manifest.json").write_text("[]")
    refused(b, "manifest.json: (top level): expected an object, got a list")


def test_deeply_nested_json_is_a_bundle_error(good, tmp_path):
    b = copy_of(good, tmp_path)
    (b / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    refused(b, "manifest.json is not valid JSON")


# Nothing in a bundle runs --------------------------------------------------------------------------------
GRADCHECK = """
import json, pathlib, sys
from gradkit.app import checks, data, flow_data, nan_data
b = data.open_bundle(sys.argv[1])
for f in (data.launch_rows, data.summary, nan_data.nan_origin, flow_data.gradient_flow, flow_data.cut_off_arrays):
    f(b)
data.kernel_code(b, "smooth"); nan_data.source_excerpt(b, "smooth", 3)
try:
    checks.run_gradcheck(b, 0)                        # no opt-in: refused, nothing compiled
    print("ran without approval"); sys.exit(1)
except checks.CheckError as exc:
    print("refused:", exc)
approved = checks.stored_source(b, "smooth")["sha256"]
try:
    r = checks.run_gradcheck(b, 0, approved=approved)
    print("result:", json.dumps({"ok": r.ok, "pairs": r.pairs}))
except checks.CheckError as exc:
    print("refused:", exc)
"""


def gradcheck_in_child(bundle) -> str:
    r = subprocess.run([sys.executable, "-c", GRADCHECK, str(bundle)], cwd=ROOT, capture_output=True,
                       text=True, timeout=TIMEOUT)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout + r.stderr
    return r.stdout


def test_the_kernel_file_named_by_the_bundle_is_never_run(good, tmp_path):
    """The manifest points the kernel at a script that would leave a marker if imported or run: opening every
    view's data and running gradcheck (refused, then approved) never creates it."""
    b = copy_of(good, tmp_path)
    marker = tmp_path / "marker"
    evil = tmp_path / "evil.py"
    evil.write_text(f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
                    "import gradkit as gk\n\n@gk.kernel\ndef smooth(x: gk.array(dtype=float), s: float, "
                    "y: gk.array(dtype=float)):\n    y[gk.tid()] = 0.0\n")
    m = json.loads((b / "manifest.json").read_text())
    m["kernels"]["smooth"]["file"] = str(evil)
    m["nan"] = {"message": "planted", "kernel": "smooth", "file": str(evil), "line": 2,
                "direction": "forward", "launch": 0}
    (b / "manifest.json").write_text(json.dumps(m))
    out = gradcheck_in_child(b)
    assert not marker.exists()
    assert "I have read this source; compile it" in out                  # refused without approval
    assert '"ok": true' in out                                           # then checked the stored kernel


def test_stored_source_that_would_run_code_is_refused(good, tmp_path):
    """A bundle whose stored source (with a matching hash) asks the compiler to evaluate Python is refused,
    even after approval; the marker is never written."""
    from gradkit.viz.bundle import source_sha256
    b = copy_of(good, tmp_path)
    marker = tmp_path / "marker"
    m = json.loads((b / "manifest.json").read_text())
    k = m["kernels"]["smooth"]
    k["python_source"] = k["python_source"].replace(
        "v = x[i]", f"v = x[i] + gk.static(open({str(marker)!r}, 'w').write('ran'))")
    k["source_sha256"] = source_sha256(k["python_source"])
    (b / "manifest.json").write_text(json.dumps(m))
    out = gradcheck_in_child(b)
    assert not marker.exists()
    assert "gk.static() evaluates Python at compile time" in out


def test_gradcheck_from_stored_source_matches_central_differences(good):
    """Approved, the stored kernel's Jacobian d y / d x (diagonal 2 s x + cos x) passes against central
    differences."""
    out = gradcheck_in_child(good)
    result = json.loads(out.split("result:", 1)[1])
    assert result["ok"] and [(p["output"], p["input"]) for p in result["pairs"]] == [("y", "x")]
    assert result["pairs"][0]["max |analytic|"] == pytest.approx(2 * 1.5 * 1.0 + np.cos(1.0), rel=1e-4)


def test_the_debugger_shows_a_bundle_error_as_a_message(good, tmp_path, monkeypatch):
    """The Streamlit app on a hostile bundle: one st.error naming the file, no exception, no absolute path."""
    testing = pytest.importorskip("streamlit.testing.v1", reason="the debugger needs Streamlit")
    b = copy_of(good, tmp_path)
    (b / "manifest.json").unlink()
    os.mkfifo(b / "manifest.json")
    monkeypatch.setattr(sys, "argv", ["main.py"])
    monkeypatch.setenv("GRADKIT_BUNDLE", str(b))
    at = testing.AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=TIMEOUT).run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert errors == ["bundle/manifest.json: is a FIFO, not a regular file"], errors
