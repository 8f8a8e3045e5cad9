"""How the geometry libraries (mesh_device.py, mesh_more.py, mesh_parity.py) turn their per-precision Python
functions into @gk.func objects: one naming and custom-gradient step, and one cache per scalar type."""

from __future__ import annotations

import functools
from types import SimpleNamespace

from .. import types as T
from ..func import Func, func_grad


def install(lib: SimpleNamespace, prefix: str, s: T.ScalarType, funcs, adjoints=()) -> SimpleNamespace:
    """Each `_name` in `funcs` as the @gk.func `lib.name` (compiled as `{prefix}_{name}_{s.name}`), and each
    `_name_adj` in `adjoints` as the custom gradient of `lib.name` (the searches' "no derivative")."""
    for py in funcs:
        name = py.__name__[1:]
        py.__name__ = py.__qualname__ = f"{prefix}_{name}_{s.name}"
        setattr(lib, name, Func(py))
    for adj in adjoints:
        name = adj.__name__[1:-4]
        adj.__name__ = adj.__qualname__ = f"{prefix}_{name}_{s.name}_adj"
        func_grad(getattr(lib, name))(adj)
    return lib


def per_precision(build):
    """`build(s)` run once per scalar type, thread-safely (its result cached)."""
    lock = __import__("threading").Lock()
    made: dict = {}

    @functools.wraps(build)
    def get(s: T.ScalarType):
        if s not in made:
            with lock:
                if s not in made:
                    made[s] = build(s)
        return made[s]
    return get
