"""The built-in backends' snippets of the conformance suite's reference native functions
(gradkit/conformance/suite/test_native.py): `scaled_square(a, x) -> a x^2` and `scale_into(a, x, out, i)`,
`out[i] = a x[i]`, in LLVM IR (cpu) and OpenCL C, forward, replay and adjoint. Each backend returns its
table from `conformance_snippets()`; they also show the calling conventions of docs/native.md."""

from __future__ import annotations

_CPU_SQUARE = "%ax = fmul float %a, %x\n%r = fmul float %ax, %x\nret float %r"
_CPU_SQUARE_REPLAY = "%xa = fmul float %x, %a\n%r = fmul float %xa, %x\nret float %r"
_CPU_SQUARE_ADJ = """%xx = fmul float %x, %x
%ga = fmul float %xx, %adj_ret
%oa = load float, ptr %adj_a
%na = fadd float %oa, %ga
store float %na, ptr %adj_a
%ax = fmul float %a, %x
%ax2 = fmul float %ax, 2.0
%gx = fmul float %ax2, %adj_ret
%ox = load float, ptr %adj_x
%nx = fadd float %ox, %gx
store float %nx, ptr %adj_x
ret void"""
_CPU_INTO = """%k = sext i32 %i to i64
%px = getelementptr float, ptr %x, i64 %k
%xv = load float, ptr %px
%v = fmul float %a, %xv
%po = getelementptr float, ptr %out, i64 %k
store float %v, ptr %po
ret void"""
_CPU_INTO_ADJ = """%k = sext i32 %i to i64
%px = getelementptr float, ptr %x, i64 %k
%xv = load float, ptr %px
%pg = getelementptr float, ptr %adj_out, i64 %k
%g = load float, ptr %pg
%ga = fmul float %xv, %g
%oa = load float, ptr %adj_a
%na = fadd float %oa, %ga
store float %na, ptr %adj_a
%gx = fmul float %a, %g
%pax = getelementptr float, ptr %adj_x, i64 %k
%ox = load float, ptr %pax
%nx = fadd float %ox, %gx
store float %nx, ptr %pax
ret void"""

CPU = {
    "scaled_square": {"forward": _CPU_SQUARE, "replay": _CPU_SQUARE_REPLAY, "adjoint": _CPU_SQUARE_ADJ},
    "scale_into": {"forward": _CPU_INTO, "replay": _CPU_INTO, "adjoint": _CPU_INTO_ADJ},
}

OPENCL = {
    "scaled_square": {"forward": "return a * x * x;", "replay": "return (x * a) * x;",
                      "adjoint": "adj_a += x * x * adj_ret; adj_x += 2.0f * a * x * adj_ret;"},
    "scale_into": {"forward": "out[i] = a * x[i];", "replay": "out[i] = a * x[i];",
                   "adjoint": "adj_a += x[i] * adj_out[i]; adj_x[i] += a * adj_out[i];"},
}
