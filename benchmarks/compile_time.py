"""W7, compile time: the kernel sources every system compiles, written in each system's dialect, and the
float64 references their results are checked against.

Cases (each in a fresh process with an empty kernel cache; the figure is the seconds from just before the
generated module is imported to the first gradient, so framework import and initialisation are left out):

    W7 n=250 .. n=2000   one straight-line kernel of n statements `a = a * 0.999 + sin(a) * c`, forward and
                         adjoint (launched on a tape, then the tape's backward)
    W7 nested-if         100 nested ifs, each guarding one such statement (CPython allows 98 levels of
                         indentation inside a def, so the innermost two levels are `elif`s: the IR is still
                         100 ifs deep)
    W7 2000 kernels      2000 tiny kernels `y[i] = x[i] * k + 0.5`, each launched forward and backward once;
                         also the growth of the process's resident memory over them (MB)

Nothing here imports a kernel framework.
"""

from __future__ import annotations

import numpy as np

STATEMENT_C = 0.001            # keeps the gradient of 2000 statements well away from 0 (it is ~e^-2)
THREADS = 4
STRAIGHT = (250, 500, 1000, 2000)
NESTED_DEPTH = 100
TINY_KERNELS = 2000
PY_MAX_NEST = 98            # CPython's indentation limit (100 levels) less the def and the kernel body

# case -> (kind, size)
CASES = {**{f"W7 n={n}": ("straight", n) for n in STRAIGHT},
         "W7 nested-if": ("nested", NESTED_DEPTH),
         "W7 2000 kernels": ("tiny", TINY_KERNELS)}
MEMORY_CASE = "W7 2000 kernels memory"

# What differs between the dialects: the import, the decorator, the parameter list and the thread index.
DIALECTS = {
    "gradkit": {"head": "import gradkit as gk\n", "deco": "@gk.kernel", "sin": "gk.sin",
                "params": "x: gk.array(dtype=float), c: float, y: gk.array(dtype=float)",
                "tiny_params": "x: gk.array(dtype=float), y: gk.array(dtype=float)",
                "index": ["i = gk.tid()"]},
    "warp": {"head": "import warp as wp\n", "deco": "@wp.kernel", "sin": "wp.sin",
             "params": "x: wp.array(dtype=float), c: float, y: wp.array(dtype=float)",
             "tiny_params": "x: wp.array(dtype=float), y: wp.array(dtype=float)",
             "index": ["i = wp.tid()"]},
    # Taichi kernels read global fields (x, y bound by the runner) and loop over them.
    "taichi": {"head": "import taichi as ti\nx = y = None\n", "deco": "@ti.kernel", "sin": "ti.sin",
               "params": "c: ti.f32", "tiny_params": "", "index": ["for i in x:"], "indent": 1},
}


def statement(d: dict) -> str:
    return f"a = a * 0.999 + {d['sin']}(a) * c"


def source(dialect: str, kind: str, n: int) -> str:
    """The Python module text of one case in `dialect` (kernels named `straight`, `nested`, `k0`..)."""
    d = DIALECTS[dialect]
    extra = "    " * d.get("indent", 0)

    def kernel(name, params, body):
        lines = [d["deco"], f"def {name}({params}):"]
        lines += ["    " + s for s in d["index"]]
        lines += [extra + "    " + s for s in body]
        return lines

    lines = [d["head"]]
    if kind == "straight":
        lines += kernel("straight", d["params"], ["a = x[i]"] + [statement(d)] * n + ["y[i] = a"])
    elif kind == "nested":
        body = ["a = x[i]"]
        depth = min(n, PY_MAX_NEST - d.get("indent", 0))
        for level in range(depth):
            body += ["    " * level + "if a > -2.0:", "    " * (level + 1) + statement(d)]
        for level in range(n - depth):          # the rest as elifs of the innermost if
            body += ["    " * (depth - 1) + f"elif a > {-3.0 - level}:", "    " * depth + statement(d)]
        lines += kernel("nested", d["params"], body + ["y[i] = a"])
    elif kind == "tiny":
        for j in range(n):
            lines += kernel(f"k{j}", d["tiny_params"], [f"y[i] = x[i] * {j + 1}.0 + 0.5"]) + [""]
    else:
        raise ValueError(kind)
    return "\n".join(lines) + "\n"


def inputs() -> np.ndarray:
    return np.linspace(0.1, 1.0, THREADS).astype(np.float32)


def reference(kind: str, n: int, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float64 (y, dy/dx) of the case; for the tiny kernels y is the last kernel's and dx the sum of all
    kernels' gradients (each backward adds into x.grad)."""
    a = x.astype(np.float64)
    if kind == "tiny":
        return a * n + 0.5, np.full_like(a, n * (n + 1) / 2)
    g = np.ones_like(a)
    for _ in range(n):        # every nested if is taken: a stays positive
        g = g * (0.999 + np.cos(a) * STATEMENT_C)
        a = a * 0.999 + np.sin(a) * STATEMENT_C
    return a, g


def rss_mb() -> float:
    """The process's resident memory now (MB)."""
    import os
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def write_module(dialect: str, kind: str, n: int, folder: str) -> str:
    """Write the case's source as a module file in `folder` (frameworks read kernel source from files)."""
    import pathlib
    path = pathlib.Path(folder) / f"w7_{kind}_{n}.py"
    path.write_text(source(dialect, kind, n))
    return str(path)


def import_path(path: str):
    """Import a module from a file path."""
    import importlib.util
    import pathlib
    import sys
    name = pathlib.Path(path).stem
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
