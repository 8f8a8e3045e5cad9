"""Every walker that must handle the whole op vocabulary does: core/ops.py `ALL` against what each walker's
dispatch handles, read from its dispatch table (a dict or `op_<name>` methods) or, for an if/elif chain, from
the `op == Op.X` / `op in GROUP` tests in its source (groups such as MEMORY or LOOPS expand to their ops).

An op a walker does not name is accounted for in this table with a reason, in one of three lists:
- `never`: the walker legitimately never sees it (`call` after inlining, the value stack before reverse mode);
- `generic`: the walker's fallback path is right for it on purpose (an instruction copied as it is);
- `gaps`: it is not handled yet (known and reported to the walker's owner; remove the entry with the fix).
So adding an op to the vocabulary fails here for every walker until each one handles it or says why not, and
an entry that goes stale (the walker now names the op) fails too, so the lists stay true.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
from dataclasses import dataclass, field

import pytest

from gradkit.core import ops
from gradkit.core.ops import ALL, Op

NO_CALLS = "backends compile lowered variants: LOWER inlines calls, inline_kept the kept ones (forward), " \
           "reverse mode replaces them by their rules (adjoints)"
NO_STACK = "the value stack (push/pop) is made by reverse mode, after this walker's stage"


@dataclass(frozen=True)
class Walker:
    """A walker: `module`, and `dispatch` the place its per-op dispatch lives: "Class.method" (an if/elif
    chain; several joined with "+" when the chain continues in helper methods), "Class.op_*" (methods named
    after the op, called as getattr(self, "op_" + op)) or "NAME" (a module-level dict keyed by op)."""

    module: str
    dispatch: str
    style: str
    never: dict[str, str] = field(default_factory=dict)
    generic: dict[str, str] = field(default_factory=dict)
    gaps: dict[str, str] = field(default_factory=dict)


# Not here, on purpose: walkers with no per-op dispatch, right for any op (core/ir.py's printer and copies,
# viz/kernel_graph.py, core/passes/widen.py, which refuses call and native by name), and passes that look
# for particular ops only (simplify, promote, inline, expand, shifts, ad/gather.py, ad/uniform.py, the
# analyses of ad/ and backends/analysis.py).
WALKERS = {
    "verify": Walker(
        "gradkit.core.verify", "_Verifier.region+structured+memory", "if/elif chain over ops and groups",
        gaps={  # each passes verify's generic path only: operands defined before use, scalar results
            Op.TID: "axis / ndim attributes and the int32 result are not checked",
            Op.SHAPE: "the array operand, axis < ndim and the int32 result are not checked",
            Op.CALL: "arguments and results are not checked against the callee's signature",
            Op.NATIVE: "arguments and results are not checked against the snippet's declared parameters",
            Op.PUSH: "its one operand and the stack / pair attributes are not checked",
            Op.POP: "its one result and the stack / pair attributes are not checked",
        }),
    "scalarize": Walker(
        "gradkit.core.passes.scalarize", "Scalarizer.instr", "if chain, fallback copies the instruction",
        never={Op.PUSH: NO_STACK, Op.POP: NO_STACK},
        generic={
            Op.CONST: "scalar already: copied",
            Op.TID: "scalar already: copied",
            Op.SHAPE: "scalar result, array operand: copied",
            Op.NATIVE: "its parameters are scalars and arrays (core/native.py): copied",
        }),
    "reverse.replay": Walker(
        "gradkit.ad.reverse", "Reverse.replay", "if chain, fallback re-emits the instruction",
        never={Op.PUSH: NO_STACK, Op.POP: NO_STACK},
        generic={op: "a value the reverse sweep reads: replayed as it is"
                 for op in (Op.CONST, Op.PRIM, Op.TID, Op.SHAPE, Op.LOAD)}),
    "reverse.reverse": Walker(
        "gradkit.ad.reverse", "Reverse.reverse", "if/elif chain; an op it does not name is a CompileError",
        never={Op.PUSH: NO_STACK, Op.POP: NO_STACK},
        generic={op: "no float operand: no gradient flows back through it"
                 for op in (Op.CONST, Op.TID, Op.SHAPE)}),
    "forward.tangent": Walker(
        "gradkit.ad.forward", "Tangent.instr", "if chain over ops and groups, fallback copies",
        never={Op.CALL: "tangent's sources are `forward` (kept calls inlined by inline_kept) and adjoints "
                        "(reverse mode replaced the calls)"},
        generic={op: "no tangent (a constant or an integer): copied" for op in (Op.CONST, Op.TID, Op.SHAPE)}),
    "cpu.codegen": Walker(
        "gradkit.backends.cpu.codegen", "Codegen.instr", "if/elif chain, else NotImplementedError",
        never={Op.CALL: NO_CALLS}),
    "cstyle.kernel": Walker(   # the OpenCL backend's and the `c` example plugin's code generator
        "gradkit.backends.cstyle_kernel", "CStyleKernel.instr", "if/elif chain, else CompileError",
        never={Op.CALL: NO_CALLS}),
    "numpy.interpreter": Walker(
        "gradkit_numpy_backend.interpreter", "OPS", "dict table (built from Run.op_* methods)",
        never={Op.CALL: NO_CALLS}),
    "op_trace": Walker(
        "gradkit.runtime.launch.op_trace", "_Thread.op_*", "method table (getattr(self, 'op_' + op))"),
}


# --------------------------------------------------------------------------- reading the dispatch

def _value(node: ast.AST, env: dict):
    """What a name or dotted name (`MEMORY`, `Op.IF`, `ops.LOOPS`) is bound to in `env`; None otherwise."""
    if isinstance(node, ast.Name):
        return env.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _value(node.value, env)
        return getattr(base, node.attr, None) if base is not None else None
    if isinstance(node, ast.Constant):
        return node.value
    return None


def _ops_of(node: ast.AST, env: dict) -> set[str]:
    """The ops an `op == X` / `op in X` comparator names: Op.X, a string, a group of core/ops.py (or any
    module-level set of ops, an alias such as verify's `_PRIM`), or a literal tuple / set of those."""
    if isinstance(node, (ast.Tuple, ast.Set, ast.List)):
        return set().union(*(_ops_of(e, env) for e in node.elts))
    value = _value(node, env)
    if isinstance(value, str):
        return {value} & ALL
    if isinstance(value, (set, frozenset, tuple)) and value and set(value) <= ALL:
        return set(value)
    return set()


def chain_ops(source: str, env: dict) -> set[str]:
    """The ops an if/elif chain in `source` dispatches on: comparisons `op == ...` and `<x>.op in ...` (== and
    in only: `op not in ALL` rejects, it handles nothing), names resolved in `env`."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(textwrap.dedent(source))):
        if not isinstance(node, ast.Compare):
            continue
        left = node.left
        if not ((isinstance(left, ast.Name) and left.id == "op") or
                (isinstance(left, ast.Attribute) and left.attr == "op")):
            continue
        for cmp, right in zip(node.ops, node.comparators):
            if isinstance(cmp, (ast.Eq, ast.In)):
                found |= _ops_of(right, env)
    return found


def handled(walker: Walker) -> set[str]:
    """The ops `walker`'s dispatch names."""
    try:
        module = importlib.import_module(walker.module)
    except ImportError as exc:
        if not walker.module.startswith("gradkit."):
            pytest.skip(f"{walker.module} is not installed ({exc})")
        raise
    if "." not in walker.dispatch:                    # a module-level dict keyed by op
        return set(getattr(module, walker.dispatch))
    cls_name, rest = walker.dispatch.split(".", 1)
    cls = getattr(module, cls_name)
    if rest == "op_*":
        return {name[3:] for name in dir(cls) if name.startswith("op_")}
    methods = [getattr(cls, m) for m in rest.split("+")]
    return set().union(*(chain_ops(inspect.getsource(m), m.__globals__) for m in methods))


# --------------------------------------------------------------------------- tests

@pytest.mark.parametrize("name", WALKERS)
def test_walker_covers_every_op(name: str) -> None:
    walker = WALKERS[name]
    got = handled(walker)
    assert got, f"{name}: no dispatch on ops found in {walker.module} {walker.dispatch} (moved? see WALKERS)"
    missing = ALL - got - set(walker.never) - set(walker.generic) - set(walker.gaps)
    assert not missing, (f"{name} ({walker.module} {walker.dispatch}) does not handle {sorted(missing)}: "
                         "handle them there, or list each in this test's WALKERS entry with the reason")


@pytest.mark.parametrize("name", WALKERS)
def test_walker_lists_are_current(name: str) -> None:
    """The never / generic / gaps lists name ops of the vocabulary the walker does not handle itself, each
    in one list: an entry made stale by a fix or a renamed op fails here."""
    walker = WALKERS[name]
    listed = [*walker.never, *walker.generic, *walker.gaps]
    assert len(listed) == len(set(listed)), f"{name}: an op is in two lists"
    assert set(listed) <= ALL, f"{name}: not ops of core/ops.py ALL: {sorted(set(listed) - ALL)}"
    stale = set(listed) & handled(walker)
    assert not stale, f"{name} now handles {sorted(stale)} itself: remove them from its WALKERS entry"


def test_chain_reader_sees_groups_and_aliases() -> None:
    """The source reader expands groups (bare or through the module) and aliases, and ignores `not in`."""
    source = """
        def instr(self, ins):
            op = ins.op
            if op == _PRIM: pass
            elif op in ops.MEMORY: pass
            elif ins.op in LOOPS: pass
            elif op in (Op.IF, "tid"): pass
            elif op not in ALL: raise ValueError(op)
            b.emit(Op.CONST)
    """
    env = {"_PRIM": Op.PRIM, "ops": ops, "LOOPS": ops.LOOPS, "Op": Op, "ALL": ALL}
    assert chain_ops(source, env) == {Op.PRIM, *ops.MEMORY, *ops.LOOPS, Op.IF, Op.TID}
