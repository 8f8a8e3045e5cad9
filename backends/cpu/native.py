"""`@gk.func_native` on the CPU backend: the "cpu" snippet is the body of an LLVM IR function.

The kernel module declares one function per (native function, variant); `define_natives` swaps each
declaration for its definition (`internal`, `alwaysinline`) in the module text, so LLVM inlines and
optimises the snippet with the kernel. Parameters are `%<name>`; arrays are `ptr` to their data. The
adjoint also takes `%adj_ret` (when the function returns a value), `ptr %adj_<p>` per float array
(its adjoint array) and `ptr %adj_<p>` per float scalar (an accumulator the snippet adds into).
"""

from __future__ import annotations

import hashlib

from llvmlite import ir

from ...core.ops import Op
from ...core.builtins.printing import PrintSpec
from . import printing
from .irtext import replace_declarations
from .lltypes import llvm_type


def accumulators(cg, b) -> dict:
    """Entry-block allocas for the float scalar adjoints of every adjoint native call."""
    out = {}
    for ins in cg.fn.walk():
        if ins.op == Op.NATIVE and ins.attrs["variant"] == "adjoint":
            out[id(ins)] = [b.alloca(cg_type(r.type), name="native_adj") for r in ins.results]
    return out


def cg_type(t):
    return llvm_type(t)


def emit_native(cg, ins, b) -> None:
    spec, variant = ins.attrs["native"], ins.attrs["variant"]
    if isinstance(spec, PrintSpec):         # a kernel's print: printf, not a user snippet (printing.py)
        printing.emit_print(cg, ins, b)
        return
    body = spec.snippet("cpu", variant)
    n = len(spec.params)
    names = [name for name, _ in spec.params]
    values = [cg.v(a) for a in ins.args[:n]]
    accs = []
    if variant == "adjoint":
        nret = 1 if spec.ret_type is not None else 0
        names += ["adj_ret"] * nret + [f"adj_{spec.params[k][0]}" for k in spec.float_arrays()]
        values += [cg.v(a) for a in ins.args[n:]]
        accs = cg.native_accs[id(ins)]
        names += [f"adj_{spec.params[k][0]}" for k in spec.float_scalars()]
        for acc, r in zip(accs, ins.results):
            b.store(ir.Constant(cg_type(r.type), 0.0), acc)
        values += accs
        ret = ir.VoidType()
    else:
        ret = cg_type(spec.ret_type) if spec.ret_type is not None else ir.VoidType()
    types = [v.type for v in values]
    digest = hashlib.sha256(body.encode()).hexdigest()[:10]
    name = f"gk_native_{spec.name}_{variant}_{digest}"
    func = cg.module.globals.get(name)
    if func is None:
        func = ir.Function(cg.module, ir.FunctionType(ret, types), name=name)
        params = ", ".join(f"{t} %{p}" for t, p in zip(types, names))
        cg.native_defs[name] = (f"define internal {ret} @\"{name}\"({params}) alwaysinline nounwind {{\n"
                                f"{body.strip()}\n}}")
    result = b.call(func, values)
    if variant == "adjoint":
        for acc, r in zip(accs, ins.results):
            cg.values[r.id] = b.load(acc)
    elif ins.results:
        cg.values[ins.results[0].id] = result


def define_natives(text: str, defs: dict) -> str:
    """Replace each native function's declaration in the module text with its definition."""
    return replace_declarations(text, defs)
