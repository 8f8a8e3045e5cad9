"""Issue #40's closing table: each of Warp's examples named there, run by Warp and by gradkit.warp in this
process, with the edits it still needs, its agreement with Warp and its time per step against Warp.

    python benchmarks/warp_examples_table.py [--quick] [--steps N] [--examples wave,raymarch,...] [--json out.json]

Each example is loaded twice by `gradkit.warp.examples.load_example`: as written (Warp), and with its imports
pointed at gradkit.warp plus the edits gradkit still needs, read at run time from
`gradkit.warp.examples.KNOWN_EDITS` and from the `<NAME>_EDITS` tuples of literals in
tests/dialects/test_warp_*examples.py (`FLUID_EDITS` is example_fluid's, `REPULSION_EDITS`
example_particle_repulsion's). Per example the table gives:

- edits: source lines of the loaded gradkit source that differ from Warp's besides the import lines (a diff of
  the loaded text against the original with only its imports rewritten);
- agreement: after the same steps on both, the largest absolute and relative difference over the example's
  state arrays, and over its gradients where it takes them (fluid_checkpoint: the initial velocities'
  gradients of a checkpointed forward and backward; diffray: the mesh rotation, translation and
  vertex-normal gradients of a taped pass; both taken before the steps, where the two systems' inputs are
  still the same; particle_repulsion: the forces after the steps, which are `wp.grad` of the potential).
  Relative: |gradkit - Warp| / max(|Warp|, 1e-3 * max|Warp|) per element, so entries near zero are measured
  against a thousandth of the array's scale; "entries off" counts those beyond 1e-3 relative plus 1e-4 of
  the array's scale;
- time per step: the median wall time of the later steps, Warp and gradkit alternating as
  benchmarks/warp_programs.py does (its `_step` and `_make` are reused), their ratio, and the median CPU time
  (all threads: Warp runs a CPU launch on one thread, gradkit on up to one per core).

Sizes keep an example within about 20 s on a 2-core CPU, rendering off; examples reading OpenUSD assets get
a stand-in `pxr` (the same for both systems). An example that fails in either system is a row with an error.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import difflib
import importlib.util
import json
import linecache
import os
import pathlib
import statistics
import sys
import time
import types

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
SYSTEMS = ("warp", "gradkit.warp")


def _sibling(name: str) -> types.ModuleType:
    """benchmarks/<name>.py under a name of its own (this file is run as a script and loaded by path)."""
    key = f"_gk_bench_{name}_for_examples_table"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, HERE / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[key] = module
    return sys.modules[key]


wpp = _sibling("warp_programs")


# ---- the edits and their diff ---------------------------------------------------------------------------

def edits_in_tests(folder: pathlib.Path = ROOT / "tests" / "dialects") -> dict[str, tuple]:
    """{name: edits} from `folder`/test_warp_*examples.py's top-level `<NAME>_EDITS = (...)` assignments whose
    value is a literal (read with ast, never run), name in lower case: see `_names`."""
    out: dict[str, tuple] = {}
    for path in sorted(folder.glob("test_warp_*examples.py")):
        for node in ast.parse(path.read_text()).body:
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name) and node.targets[0].id.endswith("_EDITS")):
                continue
            try:
                edits = ast.literal_eval(node.value)
            except ValueError:          # e.g. `KNOWN_EDITS[...]`: those are read from KNOWN_EDITS itself
                continue
            out[node.targets[0].id[:-len("_EDITS")].lower()] = tuple(tuple(e) for e in edits)
    return out


def _names(rel: str, name: str) -> bool:
    """Whether the tests' NAME_EDITS are example `rel`'s: FLUID_EDITS example_fluid's, REPULSION_EDITS
    example_particle_repulsion's (its file name is example_<name> or ends in _<name>)."""
    stem = pathlib.Path(rel).stem
    return stem == f"example_{name}" or stem.endswith(f"_{name}")


def edits_for(rel: str) -> tuple:
    """The (old, new) source edits gradkit needs for example `rel` as of now: KNOWN_EDITS, then the tests'."""
    from gradkit.warp.examples import KNOWN_EDITS
    edits = list(KNOWN_EDITS.get(rel, ()))
    for name, more in edits_in_tests().items():
        edits += [e for e in more if _names(rel, name) and e not in edits]
    return tuple(edits)


LOADED: dict[str, str] = {}        # example rel -> the source gradkit last loaded for it


def _load(rel: str, system: str):
    """The example module for `system`, gradkit's with `edits_for(rel)`; records the source gradkit loaded."""
    from gradkit.warp.examples import load_example
    gk = system != "warp"
    module = load_example(rel, gradkit=gk, edits=edits_for(rel) if gk else ())
    if gk:
        entry = linecache.cache.get(module.__file__)
        LOADED[rel] = "".join(entry[2]) if entry else None
    return module


wpp._load = _load          # our own copy of warp_programs (see _sibling): its _make loads through _load


def changed_lines(rel: str, loaded: str | None) -> tuple[int, list[str]]:
    """Lines of `loaded` (gradkit's source of `rel`) that differ from Warp's original besides its imports,
    counted per diff block as the larger of the lines removed and added; and the unified diff."""
    from gradkit.warp.examples import get_source_directory, gradkit_imports
    if loaded is None:
        raise RuntimeError(f"{rel}: the source gradkit loaded is not in linecache")
    base = gradkit_imports((pathlib.Path(get_source_directory()) / rel).read_text())[0].splitlines()
    new = loaded.splitlines()
    n = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, base, new, autojunk=False).get_opcodes():
        if tag != "equal":
            n += max(i2 - i1, j2 - j1)
    return n, list(difflib.unified_diff(base, new, rel, rel + " (gradkit)", n=0, lineterm=""))


# ---- agreement -------------------------------------------------------------------------------------------

def difference(got: dict, want: dict) -> dict:
    """{name: {max_abs, max_rel, scale, off, size}} of gradkit's arrays `got` against Warp's `want`, and "all"
    over them (the largest of each figure, the sums of off and size). Relative: per element against
    max(|Warp|, 1e-3 * max|Warp|); off: entries beyond 1e-3 relative plus 1e-4 of the array's scale."""
    out = {}
    for name, w in want.items():
        w, g = np.asarray(w, np.float64), np.asarray(got[name], np.float64)
        if g.shape != w.shape:
            raise ValueError(f"{name}: gradkit's shape {g.shape} is not Warp's {w.shape}")
        scale = float(np.abs(w).max()) if w.size else 0.0
        d = np.abs(g - w)
        rel = d / np.maximum(np.abs(w), max(1e-3 * scale, 1e-30))
        out[name] = {"max_abs": float(d.max(initial=0.0)), "max_rel": float(rel.max(initial=0.0)), "scale": scale,
                     "off": int((d > 1e-3 * np.abs(w) + 1e-4 * scale).sum()), "size": int(w.size)}
    parts = list(out.values())
    if parts:
        out["all"] = {k: max(v[k] for v in parts) for k in ("max_abs", "max_rel", "scale")}
        out["all"].update({k: sum(v[k] for v in parts) for k in ("off", "size")})
    return out


def _np(**arrays) -> dict:
    return {k: np.array(v.numpy(), copy=True) for k, v in arrays.items()}


# ---- the examples ---------------------------------------------------------------------------------------

def _cube() -> tuple[np.ndarray, np.ndarray]:
    """A unit cube about the origin: 8 points, 12 outward triangles."""
    p = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], np.float32) * 0.5
    faces = [(0, 1, 3), (0, 3, 2), (4, 6, 7), (4, 7, 5), (0, 4, 5), (0, 5, 1), (2, 3, 7), (2, 7, 6),
             (0, 2, 6), (0, 6, 4), (1, 5, 7), (1, 7, 3)]
    return p, np.array(faces, np.int32)


def _assets_pxr(quick: bool) -> types.ModuleType:
    """bunny.usd as a jittered UV sphere in the bunny's size and place (a perfect one has its pole on the
    line of example_raycast's centre pixel, a tangent ray either system may count); cube.usd and sphere.usd
    (example_mesh_intersect) as a cube and a unit UV sphere. The same module serves both systems."""
    from gradkit.warp.examples import stand_in_pxr, uv_sphere
    points, tris = uv_sphere(12 if quick else 48, jitter=0.05, rng=np.random.default_rng(7))
    points = (points * 0.5 + np.array([0.0, 0.5, 0.0])).astype(np.float32)
    sp, st = uv_sphere(16)
    prims = {"/root/cube": _cube(), "/root/sphere": (sp.astype(np.float32), st)}
    return stand_in_pxr(points, tris.reshape(-1), prims)


class Case:
    """One example: how to build it at a size, what one step is, which arrays are its state and gradients."""

    def __init__(self, rel, make, step=lambda e: e.step(), state=None, grads=None, grads_first=False, pxr=False,
                 aside=None, note="", steps=(5, 1)):
        self.rel, self.make, self.step, self.state, self.pxr = rel, make, step, state, pxr
        self.steps = steps          # timed steps after the first: (full, quick)
        # aside: gradients compared and kept in the JSON but left out of the table, for the reason in `note`
        self.aside, self.note = aside, note
        # grads_first: taken before the steps, where both systems' inputs are the same (after them, an
        # optimiser has moved each system's parameters by its own gradients)
        self.grads, self.grads_first = grads, grads_first


def _wave(system, quick):
    e = _load("core/example_wave.py", system).Example(stage_path=None)
    e.sim_substeps = 4 if quick else 16
    return e, f"{e.sim_width}x{e.sim_height} grid, {e.sim_substeps} substeps/step"


def _fluid(system, quick):
    e = _load("core/example_fluid.py", system).Example()
    e.sim_substeps = 1 if quick else 2
    return e, f"{e.rho0.shape[0]}x{e.rho0.shape[1]} grid, {e.iterations} Jacobi iterations, {e.sim_substeps} substeps/step"


def _fluid_checkpoint(system, quick):
    mod = _load("optim/example_fluid_checkpoint.py", system)
    steps, iters = (2, 3) if quick else (4, 10)
    e = mod.Example(sim_steps=steps, pressure_iterations=iters, segment_size=2 if not quick else 1)
    rng = np.random.default_rng(7)         # a non-zero initial velocity, the same for both systems
    for arr in (e.vx_arrays[0], e.vy_arrays[0]):
        arr.assign(rng.normal(0.0, 2.0, arr.shape).astype(np.float32))
    return e, (f"{e.vx_arrays[0].shape[0]}^2 grid, {steps} steps in {e.num_segments} segments, {iters} Jacobi "
               "iterations; forward+backward+Adam")


def _train_fluid(e):
    """One iteration of the example's training loop (its __main__ on the CPU)."""
    e.forward()
    e.backward()
    e.optimizer.step([e.vx_arrays[0].grad.flatten(), e.vy_arrays[0].grad.flatten()])
    e.tape.zero()


def _fluid_grads(e):
    """The initial velocities' gradients of one checkpointed forward and backward, then zeroed as the
    example's training loop does."""
    e.forward()
    e.backward()
    out = _np(vx_grad=e.vx_arrays[0].grad, vy_grad=e.vy_arrays[0].grad, loss=e.loss)
    e.tape.zero()
    return out


def _raymarch(system, quick):
    h, w = (32, 64) if quick else (128, 256)
    return _load("core/example_raymarch.py", system).Example(height=h, width=w), f"{w}x{h} pixels"


def _particle_repulsion(system, quick):
    e = _load("optim/example_particle_repulsion.py", system).Example()
    e.sim_substeps = 2 if quick else 8
    return e, f"{len(e.positions)} particles, {e.sim_substeps} substeps/step"


def _raycast(system, quick):
    h = 64 if quick else 256
    e = _load("core/example_raycast.py", system).Example(height=h, width=h)
    return e, f"{h}x{h} pixels, {e.mesh.indices.shape[0] // 3} triangles"


def _mesh_intersect(system, quick):
    e = _load("core/example_mesh_intersect.py", system).Example(stage_path=None)
    return e, f"{e.query_count} cube transforms x {e.query_num_faces} faces against {len(e.mesh_1.indices) // 3}"


def _programs(program):
    """benchmarks/warp_programs.py's construction of `program` at its full or quick size."""
    return lambda system, quick: wpp._make(program, system, wpp.SIZES[program][1 if quick else 0])


def _mesh(system, quick):
    """warp_programs' example_mesh, its particles started 12 units lower (3-13 up instead of 15-25, as
    tests/dialects/test_warp_mesh_examples.py does) so that within the steps they reach the mesh."""
    e, size = wpp._make("mesh", system, wpp.SIZES["mesh"][1 if quick else 0])
    wp = sys.modules[type(e).__module__].wp
    e.positions = wp.array(e.positions.numpy() - np.array([0.0, 12.0, 0.0], np.float32), dtype=wp.vec3)
    return e, size


def _diffray_grads(e, mode=2):
    """The rotation, translation and vertex-normal gradients of one more taped forward and backward, in the
    example's normal-map render mode (2) or as written (None: texture mode)."""
    was = e.render_mode
    if mode is not None:
        e.render_mode = mode
    e.tape = sys.modules[type(e).__module__].wp.Tape()
    with e.tape:
        e.forward()
    e.tape.backward(e.loss)
    rm = e.render_mesh
    out = _np(rot_grad=rm.rot.grad, pos_grad=rm.pos.grad, normals_grad=rm.vertex_normals.grad)
    e.tape.zero()
    e.loss.zero_()
    e.render_mode = was
    return out


DIFFRAY_NOTE = ("gradients in the normal-map render mode; in texture mode (as written) Warp 1.19 drops the gradient "
                "through `color = lambert * color` after a loop-accumulated `lambert`, so its gradients there are "
                "wrong (tests/dialects/test_warp_transform_examples.py shows it; that comparison is in the JSON "
                "as grads_aside), and the state (pixels, and the rotation the SGD steps move by each system's own "
                "texture-mode gradient) drifts apart by that error from the second step on (after the first, the JSON's "
                "state_after_first_step, they agree)")
FLUID_NOTE = ("state: the initial velocities after the Adam steps; where they are off, a later iteration's gradient "
              "differs in sign between the systems once the first updates have moved the two velocities apart by "
              "rounding (traced at the largest); after one iteration (the JSON's state_after_first_step) and for the "
              "gradients at the same inputs (gradients column) they agree")


CASES = {
    "wave": Case("core/example_wave.py", _wave, state=lambda e: _np(grid=e.sim_grid0, verts=e.sim_verts)),
    "fluid": Case("core/example_fluid.py", _fluid, state=lambda e: _np(rho=e.rho0, u=e.u0)),
    "fluid_checkpoint": Case("optim/example_fluid_checkpoint.py", _fluid_checkpoint, step=_train_fluid,
                             state=lambda e: _np(vx=e.vx_arrays[0], vy=e.vy_arrays[0], loss=e.loss),
                             grads=_fluid_grads, grads_first=True, note=FLUID_NOTE),
    "raymarch": Case("core/example_raymarch.py", _raymarch, step=lambda e: e.render(),
                     state=lambda e: _np(pixels=e.pixels)),
    "sph": Case("core/example_sph.py", _programs("sph"), state=lambda e: _np(x=e.x, v=e.v, rho=e.rho)),
    "dem": Case("core/example_dem.py", _programs("dem"), state=lambda e: _np(x=e.x, v=e.v)),
    "particle_repulsion": Case("optim/example_particle_repulsion.py", _particle_repulsion,
                               state=lambda e: _np(positions=e.positions, velocities=e.velocities),
                               grads=lambda e: _np(forces=e.forces)),
    "raycast": Case("core/example_raycast.py", _raycast, step=lambda e: e.render(),
                    state=lambda e: _np(pixels=e.pixels), pxr=True),
    "mesh": Case("core/example_mesh.py", _mesh, steps=(30, 30), pxr=True,
                 state=lambda e: _np(positions=e.positions, velocities=e.velocities, points=e.mesh.points)),
    "mesh_intersect": Case("core/example_mesh_intersect.py", _mesh_intersect,
                           state=lambda e: _np(result=e.array_result), pxr=True),
    "diffray": Case("optim/example_diffray.py", _programs("diffray"),
                    state=lambda e: _np(pixels=e.pixels, rot=e.render_mesh.rot), grads=_diffray_grads,
                    grads_first=True, pxr=True, aside=lambda e: _diffray_grads(e, None), note=DIFFRAY_NOTE),
}
EXAMPLES = tuple(CASES)


@contextlib.contextmanager
def _pxr(module):
    """sys.modules["pxr"] = module (None: left alone) for the duration."""
    if module is None:
        yield
        return
    old = sys.modules.get("pxr")
    sys.modules["pxr"] = module
    try:
        yield
    finally:
        if old is None:
            sys.modules.pop("pxr", None)
        else:
            sys.modules["pxr"] = old


def measure(name: str, quick: bool = False, steps: int | None = None) -> dict:
    """One row: `name`'s edits, agreement and time per step (Warp, gradkit), both systems stepped alike."""
    import warp
    warp.config.quiet = True
    with contextlib.redirect_stdout(sys.stderr):        # Warp 1.19 prints its banner whatever `quiet` says
        warp.init()
    case = CASES[name]
    steps = steps or case.steps[1 if quick else 0]
    examples, sizes, wps, start = {}, {}, {}, {}
    with _pxr(_assets_pxr(quick) if case.pxr else None):
        for system in SYSTEMS:
            wps[system] = wp = wpp._module(system)
            t0 = time.perf_counter()
            with wp.ScopedDevice("cpu"), contextlib.redirect_stdout(sys.stderr):     # Warp's module loads
                examples[system], sizes[system] = case.make(system, quick)
            start[system] = time.perf_counter() - t0
        n_edits, diff = changed_lines(case.rel, LOADED.get(case.rel))
        grads, aside = {}, {}
        with contextlib.redirect_stdout(sys.stderr):
            if case.grads and case.grads_first:
                grads = {s: case.grads(examples[s]) for s in SYSTEMS}
            if case.aside:
                aside = {s: case.aside(examples[s]) for s in SYSTEMS}
        stepper = {s: types.SimpleNamespace(step=lambda e=examples[s]: case.step(e)) for s in SYSTEMS}
        first = {s: wpp._step(stepper[s], wps[s], "cpu")[0] for s in SYSTEMS}
        with contextlib.redirect_stdout(sys.stderr):
            after_first = difference(*(case.state(examples[s]) for s in SYSTEMS[::-1]))
        later: dict = {s: [] for s in SYSTEMS}
        for k in range(steps):
            for s in (SYSTEMS if k % 2 == 0 else SYSTEMS[::-1]):
                later[s].append(wpp._step(stepper[s], wps[s], "cpu"))
        with contextlib.redirect_stdout(sys.stderr):
            state = {s: case.state(examples[s]) for s in SYSTEMS}
            if case.grads and not case.grads_first:
                grads = {s: case.grads(examples[s]) for s in SYSTEMS}
    agree = difference(state["gradkit.warp"], state["warp"])
    row = {"example": name, "file": case.rel, "size": sizes["warp"], "edits": n_edits, "diff": diff,
           "state": agree, "state_max_abs": agree["all"]["max_abs"], "state_max_rel": agree["all"]["max_rel"],
           "state_after_first_step": after_first,
           "steps": 1 + steps, "timed_steps": steps,
           "start_s": {s: start[s] + first[s] for s in SYSTEMS}, "first_step_s": first,
           "warp_step_s": statistics.median(w for w, _ in later["warp"]),
           "gradkit_step_s": statistics.median(w for w, _ in later["gradkit.warp"]),
           # the process's CPU seconds, all threads: Warp runs a CPU launch on one thread, gradkit on up to a core each
           "warp_step_cpu_s": statistics.median(c for _, c in later["warp"]),
           "gradkit_step_cpu_s": statistics.median(c for _, c in later["gradkit.warp"])}
    row["ratio"] = row["gradkit_step_s"] / row["warp_step_s"]
    if grads:
        g = difference(grads["gradkit.warp"], grads["warp"])
        row.update(grads=g, grads_max_abs=g["all"]["max_abs"], grads_max_rel=g["all"]["max_rel"])
    if aside:
        row["grads_aside"] = difference(aside["gradkit.warp"], aside["warp"])
    if case.note:
        row["note"] = case.note
    return row


def run(quick: bool = False, examples=EXAMPLES, steps: int | None = None) -> list[dict]:
    """A row per example (see `measure`); an example that raises gives {"example", "file", "error"}."""
    rows = []
    for name in examples:
        try:
            rows.append(measure(name, quick, steps))
        except Exception as exc:             # one example's failure is its row, not the table's end
            rows.append({"example": name, "file": CASES[name].rel, "error": f"{type(exc).__name__}: {exc}"})
    return rows


def _g(x: float) -> str:
    return "0" if x == 0 else f"{x:.1e}"


def _agree(d: dict) -> str:
    a = d["all"]
    return f"{_g(a['max_abs'])} / {_g(a['max_rel'])} ({a['off']} of {a['size']:,})"


def markdown(rows: list[dict]) -> str:
    out = ["| example | size | lines edited besides the import | state: max abs / max rel diff (entries off) | "
           "gradients: max abs / max rel diff (entries off) | per step (wall): Warp / gradkit | gradkit / Warp | "
           "per step (CPU): Warp / gradkit |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['example']} | — | — | error: {r['error'][:160]} | — | — | — | — |")
            continue
        grads = _agree(r["grads"]) if "grads" in r else "—"
        out.append(f"| {r['example']} | {r['size']} | {r['edits']} | {_agree(r['state'])} | {grads} | "
                   f"{wpp._ms(r['warp_step_s'])} / "
                   f"{wpp._ms(r['gradkit_step_s'])} ms | {r['ratio']:.2f}x | "
                   f"{wpp._ms(r['warp_step_cpu_s'])} / {wpp._ms(r['gradkit_step_cpu_s'])} ms |")
    notes = [f"- {r['example']}: {r['note']}" for r in rows if r.get("note")]
    return "\n".join(out + ([""] + notes if notes else []))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, 1 timed step after the first")
    ap.add_argument("--steps", type=int, default=None, help="timed steps per system after the first (default 5, quick 1; example_mesh 30)")
    ap.add_argument("--examples", default=",".join(EXAMPLES), help=f"comma-separated, of {', '.join(EXAMPLES)}")
    ap.add_argument("--json", default=None, help="also write the rows, with per-array figures and diffs, here")
    args = ap.parse_args(argv)
    names = [n for n in args.examples.split(",") if n]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        ap.error(f"unknown example(s) {', '.join(unknown)}: of {', '.join(EXAMPLES)}")
    load0, t0 = os.getloadavg(), time.perf_counter()
    rows = run(args.quick, names, args.steps)
    load1 = os.getloadavg()
    print(markdown(rows))
    print(f"\nWarp {__import__('warp').__version__} and gradkit.warp on the CPU, {'quick' if args.quick else 'full'} "
          f"sizes, {time.perf_counter() - t0:.0f} s in all; load average (1 min) {load0[0]:.2f} before, "
          f"{load1[0]:.2f} after, on {os.cpu_count()} cores")
    if args.json:
        os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "quick": args.quick, "cpu_count": os.cpu_count(), "load_before": load0,
                       "load_after": load1}, f, indent=1, default=float)


if __name__ == "__main__":
    main()
