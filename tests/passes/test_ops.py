"""The op vocabulary (core/ops.py): every op the pipeline emits is in it, the trait groups partition it the
way the passes read them, and `verify` refuses an op outside it."""

import pytest

from gradkit.core import ir
from gradkit.core.ops import ALL, EFFECTS, LOOPS, MEMORY, OPAQUE, STACK, STRUCTURED, VALUE, WRITES, Op
from tests.passes.test_golden_ir import CASE_NAMES, load_case


def test_groups_are_inside_the_vocabulary_and_consistent():
    for group in (VALUE, MEMORY, WRITES, STACK, EFFECTS, LOOPS, STRUCTURED, OPAQUE):
        assert group <= ALL
    assert WRITES <= MEMORY and WRITES <= EFFECTS and STACK <= EFFECTS and LOOPS < STRUCTURED
    assert not VALUE & (MEMORY | EFFECTS | STRUCTURED | OPAQUE)     # values never touch memory
    assert Op.LOAD in MEMORY and Op.LOAD not in EFFECTS               # a read is not an effect


def test_verify_refuses_an_unknown_op():
    fn = ir.Function("k", [], ir.Region(), [])
    ir.Builder(fn.body).emit("laod", [], [], {})
    with pytest.raises(ir.IRError, match="unknown op 'laod'"):
        ir.verify(fn)


@pytest.mark.parametrize("case", CASE_NAMES)
def test_every_emitted_op_is_in_the_vocabulary(case):
    kernel, _ = load_case(case)
    for variant in ("forward", "adjoint", "forward_tangent"):
        assert {i.op for i in kernel.lowered(variant).walk()} <= ALL
