"""Load Warp 1.19's own test modules (warp/tests/geometry/test_*.py of the installed package) against
gradkit.warp, and list their test functions.

The module's source is read at test time, never copied: its `import warp...` lines are pointed at
gradkit.warp by gradkit.warp.examples.gradkit_imports, and its `from warp.tests.unittest_utils import *` at
tests/dialects/warp_test_utils.py (Warp's pure NumPy helpers, plus device-aware stand-ins). Top-level
statements run one at a time: one that fails (a kernel using a type gradkit lacks, say) binds the names it
would have defined to a stand-in that raises the same error when used, so the module's other tests still
run and the tests that need it fail with the original, named error. OpenUSD (`pxr`) is not installed
here: stand_in_usd reads the text assets (.usda) itself and gives the binary ones (bunny.usd, spiky.usd) a
generated closed mesh."""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import inspect
import itertools
import linecache
import pathlib
import re
import sys
import types
import unittest
import zlib

import numpy as np

from gradkit.warp.examples import gradkit_imports, uv_sphere

_UTILS = "from warp.tests.unittest_utils import *"
_count = itertools.count()


def warp_tests_dir() -> pathlib.Path | None:
    """The installed Warp's tests folder, or None without warp-lang."""
    spec = importlib.util.find_spec("warp")
    if spec is None or not spec.submodule_search_locations:
        return None
    return pathlib.Path(list(spec.submodule_search_locations)[0]) / "tests"


class Unavailable:
    """What a failed top-level statement would have bound: raises that statement's error when used."""

    def __init__(self, name: str, error: BaseException):
        self._name, self._error = name, error

    def _raise(self, *args, **kwargs):
        raise self._error

    __call__ = __getitem__ = _raise

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise self._error

    def __repr__(self) -> str:
        return f"<unavailable {self._name}: {type(self._error).__name__}>"


def _bound_names(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in stmt.names if a.name != "*"]
    targets = stmt.targets if isinstance(stmt, ast.Assign) else \
        [stmt.target] if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) else []
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def rewritten_source(path: pathlib.Path) -> str:
    """The module's text with its warp imports pointed at gradkit.warp and the test utilities at the
    stand-in; no other line changes."""
    source = path.read_text()
    if source.count(_UTILS) != 1:
        raise ValueError(f"{path.name}: expected one `{_UTILS}` line")
    source = source.replace(_UTILS, "from tests.dialects.warp_test_utils import *")
    source, n = gradkit_imports(source)
    if n < 1:
        raise ValueError(f"{path.name}: no `import warp` line found")
    return source


def load(rel: str) -> types.ModuleType:
    """Warp's test module `rel` (under warp/tests/, e.g. "geometry/test_bvh.py") over gradkit.warp;
    `module._gk_load_errors` maps each name a failed top-level statement left unavailable to its error."""
    path = warp_tests_dir() / rel
    source = rewritten_source(path)
    name = f"_warp_own_{path.stem}_{next(_count)}"
    module = types.ModuleType(name)
    module.__file__ = str(path)
    module._gk_load_errors = {}
    sys.modules[name] = module
    linecache.cache[str(path)] = (len(source), None, source.splitlines(True), str(path))
    for stmt in ast.parse(source, str(path)).body:
        if isinstance(stmt, ast.If) and "__main__" in ast.unparse(stmt.test):
            continue
        code = compile(ast.Module(body=[stmt], type_ignores=[]), str(path), "exec")
        try:
            exec(code, module.__dict__)
        except Exception as error:      # noqa: BLE001  (kept, raised again where the name is used)
            for bound in _bound_names(stmt):
                module._gk_load_errors[bound] = error
                module.__dict__[bound] = Unavailable(bound, error)
    return module


def test_classes(module) -> list[type]:
    return [v for v in vars(module).values()
            if isinstance(v, type) and issubclass(v, unittest.TestCase) and v.__module__ == module.__name__]


def cases(module) -> dict[str, tuple]:
    """{test name: (class, function, devices marker, kwargs, check_output, is_method)}: the functions
    registered with add_function_test, and the test_* methods written in the classes."""
    out = {}
    for cls in test_classes(module):
        for name, func, marker, kwargs, check in cls.__dict__.get("_gk_cases", []):
            out[name] = (cls, func, marker, kwargs, check, False)
        for name, func in cls.__dict__.items():
            if name.startswith("test") and callable(func):
                out[f"{cls.__name__}.{name}"] = (cls, func, "all", {}, False, True)
    return out


def source_of(case: tuple) -> str:
    """The Warp test function's source text (as loaded: imports rewritten)."""
    return inspect.getsource(case[1])


def run_case(case: tuple, device: str) -> None:
    """One Warp test on gradkit device `device` (a gradkit name): a function test gets Warp's view of the
    device as its `device` argument, as Warp's runner passes it; a class method runs with that device as
    the default. Raises what the test raises (unittest's failures are AssertionError)."""
    import gradkit.warp as wp
    from tests.dialects.warp_test_utils import CheckOutput

    cls, func, _marker, kwargs, check, is_method = case
    kwargs = dict(kwargs)
    kwargs.pop("enable_cpu_blocks", None)     # Warp's runner sets wp.config.enable_cpu_blocks from it
    test = cls()
    dev = wp.get_device(device)
    with stand_in_usd(), wp.ScopedDevice(dev if is_method else None):
        if is_method:
            func(test)
        elif check:
            with CheckOutput(test):
                func(test, dev, **kwargs)
        else:
            func(test, dev, **kwargs)


# --------------------------------------------------------------------------- OpenUSD stand-in

def _usda_arrays(text: str) -> dict[str, np.ndarray]:
    """points, faceVertexCounts and faceVertexIndices of a text .usda mesh (numbers only are read)."""
    out = {}
    for key, pattern in (("points", r"point3f\[\] points = \[(.*?)\]\n"),
                         ("counts", r"int\[\] faceVertexCounts = \[(.*?)\]\n"),
                         ("indices", r"int\[\] faceVertexIndices = \[(.*?)\]\n")):
        m = re.search(pattern, text, re.S)
        numbers = np.array(re.findall(r"-?[\d.]+(?:[eE][-+]?\d+)?", m.group(1)), dtype=np.float64)
        out[key] = numbers.reshape(-1, 3) if key == "points" else numbers.astype(np.int64)
    return out


def generated_mesh(path: str) -> dict[str, np.ndarray]:
    """The mesh given in place of a binary USD asset: a closed, outward-oriented jittered UV sphere (about
    the bunny's size for bunny.usd, radius ~1 otherwise), triangles as faces of 3."""
    rng = np.random.default_rng(zlib.crc32(pathlib.Path(path).name.encode()))
    pts, tris = uv_sphere(24, 0.1, rng)
    if "bunny" in path:
        pts = pts * 0.08 + np.array([0.0, 0.1, 0.0])
    return {"points": pts, "counts": np.full(len(tris), 3, np.int64), "indices": tris.reshape(-1)}


@contextlib.contextmanager
def stand_in_usd():
    """`from pxr import Usd, UsdGeom` answering Warp's tests: Stage.Open(path), GetPrimAtPath, Mesh's
    points, face vertex counts and indices."""
    class _Attr:
        def __init__(self, value):
            self.value = value

        def Get(self):
            return self.value.copy()

    class _Mesh:
        def __init__(self, prim):
            self.data = prim

        def GetPointsAttr(self):
            return _Attr(self.data["points"])

        def GetFaceVertexCountsAttr(self):
            return _Attr(self.data["counts"])

        def GetFaceVertexIndicesAttr(self):
            return _Attr(self.data["indices"])

    class _Stage:
        def __init__(self, path):
            p = pathlib.Path(path)
            self.data = _usda_arrays(p.read_text()) if p.suffix == ".usda" else generated_mesh(str(p))

        @staticmethod
        def Open(path):
            return _Stage(path)

        def GetPrimAtPath(self, prim):
            return self.data

    pxr = types.ModuleType("pxr")
    pxr.Usd = types.SimpleNamespace(Stage=_Stage)
    pxr.UsdGeom = types.SimpleNamespace(Mesh=_Mesh)
    saved = sys.modules.get("pxr")
    sys.modules["pxr"] = pxr
    try:
        yield
    finally:
        if saved is None:
            sys.modules.pop("pxr", None)
        else:
            sys.modules["pxr"] = saved
