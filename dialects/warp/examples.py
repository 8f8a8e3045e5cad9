"""`warp.examples`: where Warp's example assets are (the installed Warp package's, when there is one), and
`load_example`, which loads one of Warp's example scripts with only its imports pointed at gradkit.warp
(the example tests and benchmarks/warp_programs.py run them so), and `stand_in_pxr`, the USD reader that
gives those scripts a generated mesh when OpenUSD is not installed."""

from __future__ import annotations

import importlib.util
import itertools
import linecache
import os
import pathlib
import re
import sys
import types

import numpy as np


def get_source_directory() -> str:
    spec = importlib.util.find_spec("warp")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("gradkit.warp.examples: Warp's examples come with the warp-lang package, "
                                "which is not installed")
    return os.path.join(list(spec.submodule_search_locations)[0], "examples")


def get_asset_directory() -> str:
    return os.path.join(get_source_directory(), "assets")


def get_output_directory() -> str:
    return os.path.join(os.getcwd(), "example_output")


# The source edits gradkit still needs besides the imports, per example (docs/porting/warp.md says why):
# none today (the last, a written-out `wp.grad` of a vec3 function, went with dialects/warp/grad.py).
KNOWN_EDITS: dict[str, tuple] = {}

_IMPORT = re.compile(r"^(\s*)import warp(\.[\w.]+)?( as wp)?\s*$", re.M)
_FROM = re.compile(r"^(\s*)from warp(\.[\w.]+)? import ", re.M)
_count = itertools.count()


def gradkit_imports(source: str) -> tuple[str, int]:
    """`source` with only its import lines pointed at gradkit.warp (`import warp as wp` -> `import
    gradkit.warp as wp`, `import warp.<sub>` -> gradkit.warp.<sub> bound as `warp`, `from warp.<sub> import
    X` -> from gradkit.warp.<sub>), and how many lines changed."""
    def repl(m):
        indent, sub, alias = m.group(1), m.group(2) or "", m.group(3)
        if alias and not sub:
            return f"{indent}import gradkit.warp as wp"
        return f"{indent}import gradkit.warp{sub}; from gradkit import warp"
    source, n = _IMPORT.subn(repl, source)
    source, m = _FROM.subn(lambda m: f"{m.group(1)}from gradkit.warp{m.group(2) or ''} import ", source)
    return source, n + m


def load_example(rel: str, gradkit: bool = True, edits: tuple = ()) -> types.ModuleType:
    """One of Warp's example scripts (`rel` under the installed warp package's examples/, e.g.
    "core/example_sph.py") as a module, not run as __main__: as written (`gradkit=False`: real Warp), or
    with its import lines pointed at gradkit.warp and the (old, new) source `edits` applied, each of which
    must match exactly once (docs/porting/warp.md lists the edits gradkit still needs)."""
    path = pathlib.Path(get_source_directory()) / rel
    source = path.read_text()
    if gradkit:
        for old, new in edits:
            if source.count(old) != 1:
                raise ValueError(f"{rel}: the edit's text {old!r} is not there once")
            source = source.replace(old, new)
        source, n = gradkit_imports(source)
        if n < 1:
            raise ValueError(f"{rel}: no `import warp` line found")
    name = f"_warp_example_{path.stem}_{'gk' if gradkit else 'wp'}_{next(_count)}"
    module = types.ModuleType(name)
    module.__file__ = str(path)       # kernels read their source from it (the text compiled is `source`)
    sys.modules[name] = module        # @wp.struct / dataclasses look their module up
    code = compile(source, str(path), "exec")
    if gradkit:       # gradkit reads a kernel's source through linecache: give it the rewritten text
        linecache.cache[str(path)] = (len(source), None, source.splitlines(True), str(path))
    exec(code, module.__dict__)
    return module


def uv_sphere(n: int = 6, jitter: float = 0.0, rng=None) -> tuple[np.ndarray, np.ndarray]:
    """A closed, outward-oriented UV sphere of radius ~1 with n rings: (points (P, 3) float64, triangles (T, 3)
    int32); `jitter` scales each vertex radially by 1 +- jitter (drawn from `rng`)."""
    th = np.linspace(0, np.pi, n + 1)[1:-1]
    ph = np.linspace(0, 2 * np.pi, 2 * n, endpoint=False)
    pts = [[0, 0, 1]] + [[np.sin(a) * np.cos(b), np.sin(a) * np.sin(b), np.cos(a)] for a in th for b in ph]
    pts = np.array(pts + [[0, 0, -1]])
    if jitter:
        pts *= 1.0 + rng.uniform(-jitter, jitter, (len(pts), 1))
    m, tris = 2 * n, []
    for b in range(m):
        tris.append([0, 1 + b, 1 + (b + 1) % m])
    for r in range(n - 2):
        for b in range(m):
            a0, a1 = 1 + r * m + b, 1 + r * m + (b + 1) % m
            tris += [[a0, a0 + m, a1 + m], [a0, a1 + m, a1]]
    last = len(pts) - 1
    for b in range(m):
        tris.append([last, 1 + (n - 2) * m + (b + 1) % m, 1 + (n - 2) * m + b])
    return pts, np.array(tris, np.int32)


def stand_in_pxr(points: np.ndarray, indices: np.ndarray, by_prim: dict | None = None) -> types.ModuleType:
    """A module answering `from pxr import Usd, UsdGeom` as Warp's examples use it: every stage and prim
    gives the mesh (points, flat indices), or `by_prim[path]` = (points, indices) for the prims named there
    (for examples whose assets, e.g. bunny.usd, need OpenUSD, which is not installed here)."""
    class _Attr:
        def __init__(self, value):
            self.value = value

        def Get(self):
            return self.value

    class _Mesh:
        def __init__(self, prim):
            self.points, self.indices = (by_prim or {}).get(prim, (points, indices))

        def GetPointsAttr(self):
            return _Attr(self.points.copy())

        def GetFaceVertexIndicesAttr(self):
            return _Attr(self.indices.reshape(-1).copy())

    class _Stage:
        @staticmethod
        def Open(path):
            return _Stage()

        def GetPrimAtPath(self, path):
            return path

    pxr = types.ModuleType("pxr")
    pxr.Usd = types.SimpleNamespace(Stage=_Stage)
    pxr.UsdGeom = types.SimpleNamespace(Mesh=_Mesh)
    return pxr
