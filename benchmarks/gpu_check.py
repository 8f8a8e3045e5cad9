"""The GPU check (issue 43 item 5): one command to run first whenever a GPU machine is lent.

    python3 benchmarks/gpu_check.py --wheelhouse .whl --out $OUT # on the GPU machine (make gpu-check);
                                                                  # $OUT: the folder whose files come back
    python3 benchmarks/gpu_check.py --prepare-wheelhouse .whl    # here, before: the wheels it will need
    python benchmarks/gpu_check.py --smoke --device opencl:0     # CPU OpenCL (PoCL): what make test runs

Steps, each timed and recorded even when one fails:
1. install: the wheels in --wheelhouse into a folder of their own (pip --no-index: the GPU machine reaches
   no registry), an OpenCL ICD for NVIDIA's driver when the image has none registered, and gradkit itself
   importable from this checkout whatever its folder is called;
2. tests: the OpenCL device tests (tests/backends/test_opencl*.py) on the chosen device;
3. bench: W1-W4 through run.py on that device against Warp CUDA (--peers warp --warp-device cuda);
4. programs: two whole programs (programs.py sources; default warp and dialect);
then one JSON and one Markdown file, benchmarks/results/gpu-check-<date>.json and .md, with the device,
every step's outcome, the W1-W4 figures and gradkit's speed-up over Warp CUDA (goal: 1.5x or more).

The carry limit: everything sent to the machine in one call, wheels included, must stay under 64 MiB.
Warp's wheel alone is larger (142 MiB for Python 3.12; its CUDA library is ~300 MB unpacked), so
--prepare-wheelhouse puts the wheels that fit in DIR/wheels and cuts a larger one into DIR/part-1, part-2,
... (each under the limit, with DIR/wheels/parts.json naming them and their SHA-256). Carry DIR/wheels
and DIR/part-k in call k, back to back while the machine stays warm: every call but the last runs
`gpu_check.py --wheelhouse DIR --stage` (keeps its part in /tmp/gk-wheel-parts and stops), the last the
check itself, which joins the parts, checks their digest and installs the wheel. A part missing (the
machine was given back between calls) leaves that wheel out and says so; Warp then reads n/a.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import pathlib
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
CARRY_LIMIT = 64 << 20
# what gradkit's OpenCL backend and the tests need beyond the GPU image's packages (KINDS.md: it has numpy,
# llvmlite and pytest), in install order; Warp last, as it is the one that may not fit
WHEELS = ["platformdirs", "pytools", "siphash24", "typing_extensions", "pyopencl", "warp-lang"]
PIP_PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
                 "manylinux1_x86_64"]
SMOKE_TESTS = ["tests/backends/test_opencl_support.py"]
FULL_TESTS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "backends").glob("test_opencl*.py"))


class Step:
    """One step's record: status ok / failed / skipped, seconds, and what it found."""

    def __init__(self, name: str) -> None:
        self.name, self.status, self.seconds, self.detail = name, "skipped", 0.0, {}
        self._t0 = time.perf_counter()

    def done(self, status: str, **detail) -> "Step":
        self.status, self.seconds = status, round(time.perf_counter() - self._t0, 2)
        self.detail.update(detail)
        return self

    def as_dict(self) -> dict:
        return {"name": self.name, "status": self.status, "seconds": self.seconds, **self.detail}


def _run(argv: list[str], env: dict, timeout: float) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        return subprocess.CompletedProcess(argv, 124, out, f"killed after {timeout:.0f} s")


def _tail(text: str, lines: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


# -- 1. install --------------------------------------------------------------------------------------------

PART_SIZE = 56 << 20        # one part per call, with room for the working tree beside it
STAGE = pathlib.Path(tempfile.gettempdir()) / "gk-wheel-parts"


def split_wheel(wheel: pathlib.Path, folder: pathlib.Path, part_size: int = PART_SIZE) -> dict:
    """Cut `wheel` into folder/part-1/, part-2/, ... (one file each, `part_size` bytes at most); returns its
    manifest entry {wheel, sha256, parts: [relative paths]}."""
    import hashlib
    data = wheel.read_bytes()
    parts = []
    for k, start in enumerate(range(0, len(data), part_size), start=1):
        rel = f"part-{k}/{wheel.name}.{k}"
        (folder / f"part-{k}").mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data[start:start + part_size])
        parts.append(rel)
    return {"wheel": wheel.name, "sha256": hashlib.sha256(data).hexdigest(), "parts": parts}


def _tree_bytes() -> int:
    """What the working tree sends with each call (tracked files), or 8 MiB when git cannot say."""
    got = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True)
    if got.returncode != 0:
        return 8 << 20
    names = [n for n in got.stdout.decode(errors="replace").split("\0") if n]
    return sum((ROOT / n).stat().st_size for n in names if (ROOT / n).is_file())


def stage_parts(wheelhouse: pathlib.Path, stage: pathlib.Path = STAGE) -> list[str]:
    """Copy the parts this call carried into `stage` (kept while the machine stays warm); their names."""
    stage.mkdir(parents=True, exist_ok=True)
    kept = []
    for part in sorted(wheelhouse.glob("part-*/*")):
        shutil.copy(part, stage / part.name)
        kept.append(part.name)
    return kept


def join_parts(wheelhouse: pathlib.Path, out: pathlib.Path, stage: pathlib.Path = STAGE) -> tuple[list, list]:
    """The wheels parts.json names, joined from the parts staged or carried now and checked against their
    SHA-256: (paths of the joined wheels, reasons for those left out)."""
    import hashlib
    manifest = wheelhouse / "wheels" / "parts.json"
    if not manifest.exists():
        return [], []
    stage_parts(wheelhouse, stage)
    joined, missing = [], []
    for entry in json.loads(manifest.read_text()):
        names = [pathlib.Path(rel).name for rel in entry["parts"]]
        absent = [n for n in names if not (stage / n).exists()]
        if absent:
            missing.append(f"{entry['wheel']}: parts {', '.join(absent)} not carried (carry each part-k in a call "
                           "of its own, back to back)")
            continue
        data = b"".join((stage / n).read_bytes() for n in names)
        if hashlib.sha256(data).hexdigest() != entry["sha256"]:
            missing.append(f"{entry['wheel']}: the joined parts do not match its SHA-256")
            continue
        out.mkdir(parents=True, exist_ok=True)
        (out / entry["wheel"]).write_bytes(data)
        joined.append(str(out / entry["wheel"]))
    return joined, missing


def prepare_wheelhouse(folder: pathlib.Path, python_version: str = "3.12") -> int:
    """Download WHEELS for the GPU machine's Python into folder/wheels, cutting a wheel that would pass the
    carry limit into parts (run here, where a registry answers). Prints what goes in which call."""
    wheels_dir = folder / "wheels"
    wheels_dir.mkdir(parents=True, exist_ok=True)
    platforms = [a for p in PIP_PLATFORMS for a in ("--platform", p)]
    total, left_out, manifest = sum(f.stat().st_size for f in wheels_dir.glob("*.whl")), [], []
    for name in WHEELS:
        with tempfile.TemporaryDirectory() as tmp:
            got = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                                  "--python-version", python_version, "--implementation", "cp", *platforms,
                                  "-d", tmp, name], capture_output=True, text=True)
            wheels = list(pathlib.Path(tmp).glob("*.whl"))
            if got.returncode != 0 or not wheels:
                left_out.append(f"{name}: {_tail(got.stderr, 1) or 'no wheel'}")
                continue
            size = sum(w.stat().st_size for w in wheels)
            room = CARRY_LIMIT - _tree_bytes() - (2 << 20)      # the working tree travels too, and a margin
            if total + size > room:
                for w in wheels:       # the parts travel beside wheels/ (whatever fits there by the end)
                    manifest.append(split_wheel(w, folder, min(PART_SIZE, room - 2 * total - (2 << 20))))
                    print(f"{w.name}: {w.stat().st_size / 2**20:.0f} MiB, cut into "
                          f"{len(manifest[-1]['parts'])} parts")
                continue
            for w in wheels:
                shutil.copy(w, wheels_dir / w.name)
            total += size
    if manifest:
        (wheels_dir / "parts.json").write_text(json.dumps(manifest, indent=2) + "\n")
    calls = max([len(m["parts"]) for m in manifest], default=1)
    print(f"{wheels_dir}: {total / 2**20:.1f} MiB of wheels; {calls} call(s): carry {wheels_dir} and "
          f"{folder}/part-k in call k" if manifest else f"{wheels_dir}: {total / 2**20:.1f} MiB of wheels")
    for line in left_out:
        print(f"left out: {line}")
    return 0


def install(wheelhouse: str | None, site: pathlib.Path, env: dict) -> Step:
    """Wheels into `site`, gradkit importable, an NVIDIA OpenCL ICD registered where none is."""
    step = Step("install")
    notes = []
    paths = [str(site)]
    wheels = []
    if wheelhouse:
        house = pathlib.Path(wheelhouse)
        wheels = sorted(glob.glob(str(house / "wheels" / "*.whl")) + glob.glob(str(house / "*.whl")))
        joined, missing = join_parts(house, site.parent / "joined")
        wheels += joined
        notes += [f"left out {m}" for m in missing]
    if wheels:
        got = _run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                    "--no-cache-dir", "--upgrade", "--target", str(site), *wheels], env, 600)
        if got.returncode != 0:
            return step.done("failed", error=_tail(got.stderr), wheels=[os.path.basename(w) for w in wheels])
        notes.append(f"installed {len(wheels)} wheels")
    else:
        notes.append(f"no wheels in {wheelhouse!r}: using what is installed" if wheelhouse else "no wheelhouse given")
    link_dir = site.parent / "gk-pkg"                # `import gradkit` from this checkout, whatever its name
    link_dir.mkdir(parents=True, exist_ok=True)
    link = link_dir / "gradkit"
    if not link.exists():
        link.symlink_to(ROOT, target_is_directory=True)
    paths.append(str(link_dir))
    env["PYTHONPATH"] = os.pathsep.join(paths + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    icd = _nvidia_icd(site.parent / "gk-icd")
    if icd:
        env["OCL_ICD_VENDORS"] = icd
        notes.append(f"registered NVIDIA's OpenCL library ({icd})")
    got = _run([sys.executable, "-c", "import gradkit, sys; print(gradkit.__file__)"], env, 120)
    if got.returncode != 0:
        return step.done("failed", error="gradkit does not import: " + _tail(got.stderr, 3), notes=notes)
    return step.done("ok", notes=notes, wheels=[os.path.basename(w) for w in wheels])


def _nvidia_icd(folder: pathlib.Path) -> str | None:
    """A vendors folder naming NVIDIA's OpenCL library (beside the ICDs registered already), when the driver has
    one and no registered ICD names it: the lent H100 image registers only PoCL's, whose library is absent."""
    registered = glob.glob("/etc/OpenCL/vendors/*.icd")
    if os.environ.get("OCL_ICD_VENDORS") or any("nvidia" in pathlib.Path(f).read_text() for f in registered):
        return None
    candidates = glob.glob("/usr/local/nvidia/lib*/libnvidia-opencl.so*") + \
        glob.glob("/usr/lib/x86_64-linux-gnu/libnvidia-opencl.so*")
    if not candidates:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "nvidia.icd").write_text(sorted(candidates)[0] + "\n")
    for icd in registered:                              # the others stay usable (only those whose library loads count)
        shutil.copy(icd, folder / pathlib.Path(icd).name)
    return str(folder)


# -- 2. device and tests ------------------------------------------------------------------------------------

def pick_device(spec: str, env: dict) -> tuple[str | None, str]:
    """The OpenCL device to check: `spec`, or with "auto" the first OpenCL device that is not PoCL's CPU
    device (else the first OpenCL device at all). Returns (name, description or why none)."""
    code = ("import gradkit as gk, json; print(json.dumps([(d.name, d.description) for d in gk.get_devices() "
            "if d.backend == 'opencl']))")
    got = _run([sys.executable, "-c", code], env, 300)
    if got.returncode != 0:
        return None, "listing devices failed: " + _tail(got.stderr, 3)
    devices = json.loads(got.stdout.strip().splitlines()[-1])
    if spec != "auto":
        match = [d for d in devices if d[0] == spec or (spec == "opencl" and d[0].startswith("opencl"))]
        return (match[0][0], match[0][1]) if match else (None, f"no device {spec!r} among {devices}")
    gpus = [d for d in devices if "Portable Computing Language" not in d[1] and "pthread" not in d[1]]
    chosen = (gpus or devices or [(None, "no OpenCL device")])[0]
    return chosen[0], chosen[1]


def run_tests(device: str, files: list[str], env: dict, timeout: float) -> Step:
    step = Step("tests")
    got = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", *files],
               dict(env, GRADKIT_TEST_DEVICES=device), timeout)
    counts = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|errors?|skipped)", got.stdout)}
    status = "ok" if got.returncode == 0 else "failed"
    return step.done(status, files=files, counts=counts, returncode=got.returncode,
                     **({"output": _tail(got.stdout + got.stderr, 30)} if status != "ok" else {}))


# -- 3. bench and 4. programs -------------------------------------------------------------------------------

def run_bench(device: str, peers: str, smoke: bool, out: pathlib.Path, env: dict, timeout: float) -> Step:
    step = Step("bench")
    argv = [sys.executable, str(HERE / "run.py"), "--devices", device, "--peers", peers, "--warp-device", "cuda",
            "--jax-device", "cuda", "--workloads", "W1,W2,W3,W4", "--out", str(out)] + (["--smoke"] if smoke else [])
    got = _run(argv, env, timeout)
    js = out / "results.json"
    if got.returncode != 0 or not js.exists():
        return step.done("failed", error=_tail(got.stdout + got.stderr))
    doc = json.loads(js.read_text())
    errors = [f"{r['system']} {r['case']}: {r['error']}" for r in doc["results"] if "error" in r]
    return step.done("ok" if not errors else "failed", results=doc, markdown=(out / "results.md").read_text(),
                     **({"errors": errors} if errors else {}))


def run_programs(sources: str, smoke: bool, env: dict, timeout: float) -> Step:
    step = Step("programs")
    if not sources:
        return step.done("skipped", reason="no program sources asked for (--program-sources)")
    sys.path.insert(0, str(HERE))
    import programs
    old = dict(os.environ)
    os.environ.update(env)                    # the sources' processes see the installed wheels and gradkit
    try:
        rows = programs.run_sources(programs.pick(sources), quick=smoke, timeout=timeout)
    finally:
        os.environ.clear()
        os.environ.update(old)
    failed = [r for r in rows if "error" in r]
    return step.done("ok" if rows and not failed else "failed", rows=rows, markdown=programs.markdown(rows))


def speedups(doc: dict) -> dict:
    """Each GPU peer's minimum over gradkit's per W1-W4 case (goal 1.5 or more over Warp CUDA), where both have
    a figure: {"<case> vs <peer>": ratio}."""
    by = {(r["system"], r["case"]): r for r in doc.get("results", []) if "min" in r}
    ours = [s["label"] for s in doc.get("systems", []) if s["system"] == "gradkit"]
    peers = [s["label"] for s in doc.get("systems", []) if s["system"] in ("warp", "jax")]
    out = {}
    for (system, case), r in by.items():
        for peer in peers if ours and system == ours[0] else ():
            if (peer, case) in by:
                out[f"{case} vs {peer}"] = round(by[(peer, case)]["min"] / r["min"], 3)
    return out


# -- the report --------------------------------------------------------------------------------------------

def gpu_info() -> str:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "no nvidia-smi"
    got = subprocess.run([smi, "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True)
    return got.stdout.strip() or got.stderr.strip()


def markdown(doc: dict) -> str:
    meta = doc["meta"]
    lines = [f"# GPU check, {meta['date']}", "",
             f"Machine: {meta['machine']}; GPU: {meta['gpu']}; gradkit device: {meta['device'] or 'none'} "
             f"({meta['device_desc']}).", "", "| step | status | seconds | what |", "|---|---|---:|---|"]
    for s in doc["steps"]:
        what = s.get("error") or s.get("reason") or ""
        if s["name"] == "tests" and "counts" in s:
            what = ", ".join(f"{v} {k}" for k, v in s["counts"].items()) + f" ({len(s['files'])} files)"
        elif s["name"] == "install":
            what = what or "; ".join(s.get("notes", []))
        elif s["name"] == "bench" and s["status"] != "skipped":
            what = what or "; ".join(s.get("errors", [])[:3]) or "W1-W4 checked against float64 and timed"
        elif s["name"] == "programs" and "rows" in s:
            what = f"{len(s['rows'])} rows"
        lines.append(f"| {s['name']} | {s['status']} | {s['seconds']:.1f} | {what[:300]} |")
    if doc["speedups"]:
        lines += ["", "The GPU peer's time over gradkit's (goal: 1.5 or more over Warp CUDA):", "",
                  "| case | speed-up |", "|---|---:|"] + [f"| {c} | {v:.2f} |" for c, v in doc["speedups"].items()]
    for s in doc["steps"]:
        if s.get("markdown"):
            body = s["markdown"].replace("\n# ", "\n### ")
            lines += ["", f"## {s['name']}", "", body[2:] if body.startswith("# ") else body]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one test file, programs only if named")
    ap.add_argument("--device", default="auto", help="gradkit OpenCL device (default: the first that is a GPU)")
    ap.add_argument("--wheelhouse", default=None, help="a folder of wheels to install first (pip --no-index)")
    ap.add_argument("--prepare-wheelhouse", default=None, metavar="DIR",
                    help="download the wheels the GPU machine needs into DIR (here, with a registry) and stop")
    ap.add_argument("--peers", default="warp", help="run.py's --peers for W1-W4 (default warp, on cuda)")
    ap.add_argument("--program-sources", default=None,
                    help="programs.py sources (default warp,dialect; smoke: none)")
    ap.add_argument("--tests", default=None, help="test files, comma-separated (default the OpenCL tests)")
    ap.add_argument("--timeout", type=float, default=None, help="seconds per step (default 1800; smoke 300)")
    ap.add_argument("--out", default=str(HERE / "results"), help="where the JSON and Markdown go")
    ap.add_argument("--stage", action="store_true",
                    help="only keep the wheel parts this call carried (every call but the last, see above)")
    args = ap.parse_args(argv)
    if args.prepare_wheelhouse:
        return prepare_wheelhouse(pathlib.Path(args.prepare_wheelhouse))
    if args.stage:
        kept = stage_parts(pathlib.Path(args.wheelhouse or ".whl"))
        print(f"staged {', '.join(kept) or 'nothing'} in {STAGE}; {sorted(p.name for p in STAGE.iterdir())}")
        return 0
    timeout = args.timeout or (300.0 if args.smoke else 1800.0)
    sources = args.program_sources if args.program_sources is not None else ("" if args.smoke else "warp,dialect")
    work = pathlib.Path(tempfile.mkdtemp(prefix="gk-gpu-check-"))
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    steps = [install(args.wheelhouse, work / "site", env)]
    device, desc = pick_device(args.device, env) if steps[0].status == "ok" else (None, "install failed")
    if device is None:
        steps += [Step(n).done("skipped", reason=f"no OpenCL device: {desc}") for n in ("tests", "bench")]
    else:
        files = args.tests.split(",") if args.tests else (SMOKE_TESTS if args.smoke else FULL_TESTS)
        steps.append(run_tests(device, files, env, timeout))
        steps.append(run_bench(device, args.peers, args.smoke, work / "bench", env, timeout))
    steps.append(run_programs(sources, args.smoke, env, timeout))
    bench = next((s.detail.get("results") for s in steps if s.name == "bench"), None) or {}
    doc = {"meta": {"date": datetime.datetime.now().isoformat(timespec="seconds"), "smoke": args.smoke,
                    "machine": f"{platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
                    "gpu": gpu_info(), "device": device, "device_desc": desc, "argv": sys.argv[1:] if argv is None
                    else argv},
           "steps": [s.as_dict() for s in steps], "speedups": speedups(bench)}
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"gpu-check-{doc['meta']['date'][:10]}" + ("-smoke" if args.smoke else "")
    (out / f"{stem}.json").write_text(json.dumps(doc, indent=2) + "\n")
    (out / f"{stem}.md").write_text(markdown(doc))
    print(markdown(doc))
    print(f"wrote {out / stem}.json and .md")
    shutil.rmtree(work, ignore_errors=True)
    return 0 if all(s.status != "failed" for s in steps) else 1


if __name__ == "__main__":
    sys.exit(main())
