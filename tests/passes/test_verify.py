"""`verify` (core/verify.py) with its type checks: every kernel the suite builds verifies at each stage,
its adjoint and tangent included, and hand-built ill-typed IR is refused with an IRError naming the
function and the instruction.

The kernels are the golden cases (tests/passes/cases) and the language tier's constructs
(tests/lang/constructs.py), lowered and differentiated here directly, outside the declared pipeline, so
the AD passes' own output is what is checked.
"""

from __future__ import annotations

import re

import pytest

import gradkit as gk
from gradkit.ad.forward import tangent_function
from gradkit.ad.pipeline import build_variant
from gradkit.ad.reverse import adjoint_function
from gradkit.core import ir
from gradkit.core import types as T
from gradkit.core.ir import Builder, Function, IRError, Param, Region, Value, verify
from gradkit.core.passes import lower
from gradkit.conformance.lang.constructs import CONSTRUCTS
from tests.passes.test_golden_ir import CASE_NAMES, load_case

F32, F64, I32, BOOL = T.float32, T.float64, T.int32, T.bool_


@gk.kernel
def counted_gather(x: gk.array(dtype=float), counter: gk.array(dtype=int), y: gk.array(dtype=float)):
    slot = gk.atomic_add(counter, 0, 1)     # an atomic whose old value is used: replayed in the adjoint
    gk.atomic_add(counter, 1, 1)            # one whose old value is not: skipped by the replay
    y[slot] = x[slot] * 2.0


KERNELS = {f"case-{c}": load_case(c)[0] for c in CASE_NAMES}
KERNELS.update({f"lang-{c.name}": c.kernel for c in CONSTRUCTS if "forward" not in (c.refuses or {})})
KERNELS["counted_gather"] = counted_gather


def _derived(kernel) -> list[Function]:
    """The kernel's lowered IR, adjoint, tangent and tangent of the adjoint, built by the AD passes
    themselves (those a construct refuses, with a CompileError, are left out)."""
    forward_ad = lower(kernel.typed_ir)
    out = [forward_ad]
    for make in (lambda: adjoint_function(forward_ad),
                 lambda: tangent_function(build_variant("forward", forward_ad))):
        try:
            out.append(make())
        except (gk.CompileError, gk.GradientRuleError):
            continue
        if out[-1].name.endswith("_adjoint"):
            try:
                out.append(tangent_function(out[-1]))
            except (gk.CompileError, gk.GradientRuleError):
                pass
    return out


@pytest.mark.parametrize("name", list(KERNELS))
def test_lowered_adjoint_and_tangent_verify(name):
    kernel = KERNELS[name]
    verify(kernel.typed_ir)
    for fn in _derived(kernel):
        verify(fn, scalar_only=True)
        # reverse mode's notes between its phases stay in its own tables, never in the IR it emits
        hidden = {k for ins in fn.walk() for k in ins.attrs if k.startswith("_")}
        assert not hidden, f"{fn.name}: hidden attrs {hidden} in the IR"


def test_a_replayed_atomic_is_the_one_whose_value_is_used():
    adj = adjoint_function(lower(counted_gather.typed_ir))
    atomics = [i for i in adj.walk() if i.op == "atomic" and i.args[0].hint == "counter"]
    assert len(atomics) == 1 and atomics[0].args[1].const_value == 0


# --------------------------------------------------------------------------- ill-typed IR


def _kernel(name: str, **params) -> tuple[Function, Builder, dict[str, Value]]:
    ps = [Param(n, t) for n, t in params.items()]
    fn = Function(name, ps, Region(), [])
    return fn, Builder(fn.body), {p.name: p.value for p in ps}


def _refused(fn: Function, ins: ir.Instr, what: str) -> None:
    """verify raises an IRError whose message starts with the function's name, says `what` and shows `ins`."""
    with pytest.raises(IRError) as info:
        verify(fn)
    msg = str(info.value)
    assert msg.startswith(f"{fn.name}: "), msg
    assert re.search(what, msg), msg
    assert repr(ins) in msg, msg


def test_prim_whose_result_is_not_its_type_rule():
    fn, b, v = _kernel("bad_prim", a=F32, c=F32)
    ins = b.emit("prim", [v["a"], v["c"]], [F64], {"name": "add"})
    _refused(fn, ins, r"prim add gives \(float64\), its type rule float32")


def test_unknown_prim():
    fn, b, v = _kernel("bad_name", a=F32)
    ins = b.emit("prim", [v["a"]], [F32], {"name": "sine"})
    _refused(fn, ins, "unknown prim 'sine'")


def test_prim_whose_rule_refuses_the_arguments():
    fn, b, v = _kernel("bad_args", a=F32)
    ins = b.emit("prim", [v["a"]], [F32], {"name": "add"})      # add takes two
    _refused(fn, ins, "prim add refuses its arguments")


def test_store_of_float64_into_float32_array():
    fn, b, v = _kernel("bad_store", y=T.array_type(F32), a=F64)
    i = b.const(0, I32)
    b.store(v["y"], [i], v["a"], comp=0)
    _refused(fn, fn.body.body[-1], "store of a float64 into elements of float32")


def test_load_type_follows_the_component_index():
    fn, b, v = _kernel("bad_load", p=T.array_type(T.vec3))
    i = b.const(0, I32)
    whole = b.load(v["p"], [i])                       # vec3
    assert whole.type is T.vec3 and b.load(v["p"], [i], comp=1).type is F32
    verify(fn)
    ins = b.emit("load", [v["p"], i], [F32], {"comp": None})
    _refused(fn, ins, r"load gives \(float32\) from elements of vec3")


def test_if_whose_branches_yield_different_types():
    fn, b, v = _kernel("bad_if", a=F32, d=F64, c=BOOL)
    ins = b.emit("if", [v["c"]], [F32], regions=[Region(yields=[v["a"]]), Region(yields=[v["d"]])])
    _refused(fn, ins, r"if's else branch yields \(float64\), its results are \(float32\)")


def test_if_on_a_float():
    fn, b, v = _kernel("bad_cond", a=F32)
    ins = b.emit("if", [v["a"]], [], regions=[Region(), Region()])
    _refused(fn, ins, "if on a float32, not bool")


def test_for_whose_body_yields_another_type():
    fn, b, v = _kernel("bad_for", a=F32, d=F64)
    zero, one = b.const(0, I32), b.const(1, I32)
    body = Region(params=[Value(I32, "k"), Value(F32, "s")], yields=[v["d"]])
    ins = b.emit("for", [zero, one, one, v["a"]], [F32], regions=[body])
    _refused(fn, ins, r"for's body yields \(float64\), its results are \(float32\)")


def test_while_whose_cond_yields_a_float():
    fn, b, v = _kernel("bad_while", a=F32)
    s, t = Value(F32, "s"), Value(F32, "t")
    ins = b.emit("while", [v["a"]], [F32], regions=[Region(params=[s], yields=[s]), Region(params=[t], yields=[t])])
    _refused(fn, ins, r"while's cond yields \(float32\), not one bool")


def test_use_before_definition():
    fn, b, v = _kernel("bad_ssa", a=F32)
    ghost = Value(F32, "ghost")
    ins = b.emit("prim", [v["a"], ghost], [F32], {"name": "add"})
    _refused(fn, ins, "%ghost.* used before definition")


def test_non_scalar_after_scalarize():
    fn, b, v = _kernel("bad_scalar", p=T.array_type(T.vec3))
    b.load(v["p"], [b.const(0, I32)])
    verify(fn)
    with pytest.raises(IRError, match="bad_scalar: non-scalar value"):
        verify(fn, scalar_only=True)
