"""A generated program: helper functions and a chain of kernels as one Python source, the arrays they use,
and the steps (launches, host ops) that run them; written twice to disk (with `gk` = gradkit and with
`gk` = the NumPy shim) and imported, plus the float64 reference run of the whole chain.
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
import pathlib
from dataclasses import dataclass

import numpy as np

from tests.fuzz import np_gk
from tests.fuzz.exprs import STRUCT_SRC, VLEN

DTYPE = {"f": "gk.float64", "i": "gk.int32", "v2": "gk.vec2d", "v3": "gk.vec3d", "v4": "gk.vec4d",
         "m2": "gk.mat22d", "m3": "gk.mat33d", "m4": "gk.mat44d"}
INITS = {"zeros": 0.0, "ones": 1.0, "big": 100.0, "small": -100.0}


def elem_shape(kind: str) -> tuple:
    """Trailing NumPy dimensions of one element of this kind."""
    if kind in ("f", "i"):
        return ()
    return (VLEN[kind],) if kind[0] == "v" else (VLEN[kind],) * 2


@dataclass(eq=False)
class ArraySpec:
    name: str
    kind: str                     # "f", "i", "v2".."v4", "m2".."m4"
    shape: tuple
    owner: int | None = None      # the kernel (index) that writes it; None for inputs, -1 for host-op targets
    init: str = "input"           # "input" or a key of INITS
    shared: bool = False          # written by several threads (accumulators): never read by its writer

    def annotation(self) -> str:
        nd = f", ndim={len(self.shape)}" if len(self.shape) > 1 else ""
        return f"gk.array(dtype={DTYPE[self.kind]}{nd})"

    @property
    def np_shape(self) -> tuple:
        return self.shape + elem_shape(self.kind)


@dataclass(eq=False)
class KernelSrc:
    name: str
    src: str
    reads: list                   # array names (inputs of the launch), then the ints n, m
    writes: list                  # array names (outputs of the launch)


class Program:
    """Helpers, kernels and the steps that run them (a plain class: Hypothesis prints it with __repr__)."""

    def __init__(self, N: int, ints: dict, fwd_only: bool = False):
        self.N, self.ints = N, ints              # threads per launch; {"n": ..., "m": ...}: int arguments
        self.dim = N                             # launch dim: N, or a tuple whose product is N (i: flat)
        self.arrays: dict = {}                   # name -> ArraySpec
        self.helpers: list = []                  # source text of @gk.func helpers
        self.kernels: list = []                  # KernelSrc
        self.steps: list = []                    # ("launch", k) | ("copy"/"assign", dst, src)
        self.fwd_only = fwd_only                 # breaks reverse-mode rules on purpose: values and JVPs only
        self.features: set = set()               # constructs used that have documented refusals
        self.consts: dict = {}                   # module-level constants: SCALE, KN (int), OFFS (tuple)

    def body(self) -> str:
        header = "".join(f"{k} = {v!r}\n" for k, v in self.consts.items())
        if "struct" in self.features:
            header += "\n\n" + STRUCT_SRC
        return header + "\n\n" + "\n\n".join(self.helpers + [k.src for k in self.kernels]) + "\n"

    def outputs(self) -> list:
        return [a for a in self.arrays.values() if a.owner is not None]

    def inputs(self) -> list:
        return [a for a in self.arrays.values() if a.owner is None]

    def __repr__(self) -> str:
        steps = ", ".join(f"launch {self.kernels[s[1]].name}" if s[0] == "launch" else
                          f"{s[0]}({', '.join(map(str, s[1:]))})" for s in self.steps)
        arrays = ", ".join(f"{a.name}{list(a.shape)}:{a.kind}" for a in self.arrays.values())
        return (f"\n# N={self.N} dim={self.dim} ints={self.ints} fwd_only={self.fwd_only} "
                f"features={sorted(self.features)}\n# arrays: {arrays}\n# steps: {steps}\n" + self.body())


_ids = itertools.count()


class _ElementComponentWrites(ast.NodeTransformer):
    """`a[i][c] op= v` / `a[i].x op= v` (a component of an array element) as `_e = a[i]; _e[c] op= v;
    a[i] = _e`: the shim reads array elements as copies (values), as gradkit does, so a component write
    on one needs the explicit store back. The only rewrite of the reference; every other line is the same."""

    def visit_Assign(self, node):
        return self._split(node, node.targets[0]) if len(node.targets) == 1 else node

    def visit_AugAssign(self, node):
        return self._split(node, node.target)

    def _split(self, node, target):
        if not isinstance(target, (ast.Subscript, ast.Attribute)) or \
                not isinstance(target.value, ast.Subscript):
            return node
        elem = target.value
        tmp = ast.Name("_elem", ast.Store())
        target.value = ast.Name("_elem", ast.Load())
        store = ast.Subscript(elem.value, elem.slice, ast.Store())
        return [ast.Assign([tmp], ast.Subscript(elem.value, elem.slice, ast.Load())), node,
                ast.Assign([store], ast.Name("_elem", ast.Load()))]


def reference_source(body: str) -> str:
    return ast.unparse(ast.fix_missing_locations(_ElementComponentWrites().visit(ast.parse(body))))


def build(prog: Program, folder: pathlib.Path):
    """Write the program as a gradkit module and as a reference module (`gk` = np_gk); import both."""
    k = next(_ids)
    mods = []
    for suffix, header in (("", "import gradkit as gk\n"), ("_ref", "from tests.fuzz import np_gk as gk\n")):
        path = folder / f"fuzz_case_{k}{suffix}.py"
        path.write_text(header + "\n\n" + (prog.body() if not suffix else reference_source(prog.body())))
        spec = importlib.util.spec_from_file_location(path.stem, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        mods.append(mod)
    return mods[0], mods[1]


def initial(spec: ArraySpec, inputs: dict) -> np.ndarray:
    """The starting values of an array (inputs from `inputs`, outputs from their init rule)."""
    if spec.owner is None:
        return np.array(inputs[spec.name])
    return np.full(spec.np_shape, INITS[spec.init], dtype=np.float64)


def reference(prog: Program, ref_mod, inputs: dict) -> dict:
    """Run the chain with the NumPy shim; returns {output name: float64 array}."""
    data = {name: initial(a, inputs) for name, a in prog.arrays.items()}
    data.update({name: v.astype(np.int64) for name, v in data.items() if prog.arrays[name].kind == "i"})
    wrapped = {name: (np_gk.VecArray(v, len(elem_shape(prog.arrays[name].kind)))
                      if elem_shape(prog.arrays[name].kind) else v) for name, v in data.items()}
    for step in prog.steps:
        if step[0] == "launch":
            ks = prog.kernels[step[1]]
            args = [prog.ints[a] if a in prog.ints else wrapped[a] for a in ks.reads + ks.writes]
            np_gk.launch(getattr(ref_mod, ks.name), prog.dim, args)
        elif step[0] == "fill":
            data[step[1]][...] = step[2]
        elif len(step) == 6:                   # gk.copy of a range: flat element offsets and count
            _, dst, src, do, so, n = step
            flat_dst = data[dst].reshape(_elems(prog, dst), -1)
            flat_dst[do:do + n] = data[src].reshape(_elems(prog, src), -1)[so:so + n]
        else:                                  # copy, assign, clone: the whole array
            data[step[1]][...] = data[step[2]]
    return {a.name: data[a.name] for a in prog.outputs()}


def _elems(prog: Program, name: str) -> int:
    n = 1
    for d in prog.arrays[name].shape:
        n *= d
    return n


def random_inputs(prog: Program, rng: np.random.Generator) -> dict:
    """Float inputs in [-1.5, 1.5] (vectors N(0, 1)); index arrays in [0, N)."""
    out = {}
    for a in prog.inputs():
        if a.kind == "i":
            out[a.name] = rng.integers(0, prog.N, a.shape).astype(np.int32)
        elif a.kind == "f":
            out[a.name] = rng.uniform(-1.5, 1.5, a.np_shape)
        else:
            out[a.name] = rng.normal(0.0, 1.0, a.np_shape)
    return out
