"""`ti.math`: the vector types and the common functions, as gradkit builtins or dialect macros."""

from __future__ import annotations

import gradkit as _gk
from gradkit.core import types as _T
from gradkit.core.lang import LangFunction as _LF

from .errors import unsupported_name
from .lang import _norm, _normalized, macro

vec2, vec3, vec4 = _T.vector(2, _T.float32), _T.vector(3, _T.float32), _T.vector(4, _T.float32)
ivec2, ivec3, ivec4 = _T.vector(2, _T.int32), _T.vector(3, _T.int32), _T.vector(4, _T.int32)
mat2, mat3, mat4 = _T.matrix((2, 2), _T.float32), _T.matrix((3, 3), _T.float32), _T.matrix((4, 4), _T.float32)
pi = 3.141592653589793
e = 2.718281828459045
inf = float("inf")

sqrt, exp, log, sin, cos, tan, tanh = _gk.sqrt, _gk.exp, _gk.log, _gk.sin, _gk.cos, _gk.tan, _gk.tanh
dot, cross, clamp = _gk.dot, _gk.cross, _gk.clamp
floor, ceil, sign = _gk.floor, _gk.ceil, _gk.sign
length = _LF("length", "macro", macro=lambda E, v: _norm(E, v), host=lambda v: (sum(x * x for x in v)) ** 0.5)
normalize = _LF("normalize", "macro", macro=lambda E, v: _normalized(E, v), host=None)


@macro("mix")
def mix(E, x, y, a):
    """x * (1 - a) + y * a"""
    lw = E.lw
    return lw.binop("add", lw.binop("mul", x, lw.binop("sub", 1.0, a, E.node), E.node),
                    lw.binop("mul", y, a, E.node), E.node)


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(f"module 'gradkit.taichi.math' has no attribute {name!r}")
    raise unsupported_name("gradkit.taichi.math", name)
