"""Lowered core IR → LLVM IR (llvmlite.ir).

A kernel becomes `void name(i64 start, i64 end, i64* args)`: a loop over the
linear thread ids [start, end) around the kernel body, so LLVM vectorises it.
`args` is a packed block of 64-bit slots (see `Layout`): the launch grid, the
fault record, then per parameter either [data pointer, extent 0, ...] or one
scalar slot. Structured regions become basic blocks with phi nodes.
"""

from __future__ import annotations

from llvmlite import ir

from ...backends.analysis import local_scatters, reduction_sites as _reduction_sites, streamed_outputs
from ...backends.base import OUT_OF_BOUNDS, STACK_OVERFLOW, bounds_sites
from ...core import types as T
from ...core.builtins import BUILTINS
from ...core.ir import Function, Instr, Region
from ...core.ops import MEMORY, STACK, Op
from . import native
from .control import ControlFlow
from .edges import edge_tests
from .layout import ALL, LOCAL, layout_of
from .lltypes import F32, F64, I1, I8, I32, I64, llvm_type, storage_type
from .mathlib import INLINE_MATH_MAX, POLY_FNS, MathLib
from .prims import emit_prim
from .thread_loops import STREAM_TBAA, ThreadLoops, assume_bundles

STREAM_MAX_INSTRS = 256    # kernels with more IR instructions get no streaming copy of their loop

def poly_calls(fn: Function) -> int:
    """How many float32 math calls the kernel makes that mathlib computes with inlineable polynomials."""
    count = 0
    for ins in fn.walk():
        if ins.op == Op.PRIM and ins.args and ins.args[0].type is T.float32:
            entry = BUILTINS.get(ins.attrs["name"])
            count += entry is not None and entry.cmath in POLY_FNS
    return count


class Codegen(ControlFlow, ThreadLoops):
    """Builds one LLVM module holding one kernel function."""

    def __init__(self, fn: Function, name: str, debug: bool, stack_size: int, fast_math: bool = False,
                 streaming: bool = True, proven: frozenset = frozenset()):
        self.fn, self.name, self.debug, self.stack_size = fn, name, debug, stack_size
        self.proven = proven          # bounds sites the launch proves in bounds: unchecked under debug
        self.fast_math = fast_math
        self.module = ir.Module(name=name)
        self.math = MathLib(self.module, fast_math, inline=poly_calls(fn) <= INLINE_MATH_MAX)
        self.layout = layout_of(fn)
        self.values: dict[int, ir.Value] = {}
        self.loop_sums: set[int] = set()       # float add/sub ids that may reassociate (loop sums)
        self.arrays: dict[int, tuple] = {}       # param value id -> (pointer, [extents i64], elem type)
        self.sites = {id(ins): k for k, ins in enumerate(bounds_sites(fn))} if debug else {}
        self.uses_stack = any(i.op in STACK for i in fn.walk())
        self.reductions = {} if debug else _reduction_sites(fn)   # id(ins) -> key of its accumulator
        self.accumulators: dict = {}                                  # key -> (alloca, ins)
        self.native_defs: dict[str, str] = {}                         # native snippet name -> definition
        self.local_params = local_scatters(fn)                        # param index -> shifts (build)
        self.local: frozenset = frozenset()
        self.interior = False             # emitting a gathered adjoint's loop over a row's middle
        tests = edge_tests(fn) if not debug and fn.attrs.get("gather_margin") else ([], [])
        self.edges = tests if tests[0] else None       # edge tests and their bounds' instructions
        self.folds: dict = {}             # in that loop: id of an edge test -> its outcome there
        # Arrays whose stores may bypass the cache on large grids (thread_loops.streaming_loops), for kernels
        # small enough that a second copy of the loop costs little to compile.
        small = streaming and not debug and sum(1 for _ in fn.walk()) <= STREAM_MAX_INSTRS
        self.streamed = {fn.params[k].value.id for k in streamed_outputs(fn)} if small else set()
        self.streaming = False            # emitting the aligned loop whose streamed stores are non-temporal
        self._stream_tag = None

    # ------------------------------------------------------------------ function skeleton
    def build(self) -> ir.Module:
        """The kernel over a range of threads, its whole-grid entry and, for kernels with shifted scatter-adds
        (backends/analysis.py local_scatters), a second range entry `<name>_local` whose adds to those
        arrays are plain read-modify-writes: right for threads no other worker's thread meets on an element
        (the middle of a chunk), and for the whole grid run on one thread."""
        func = self.kernel_function(self.name, frozenset())
        local = None
        if self.local_params and not self.debug:
            ids = frozenset(self.fn.params[k].value.id for k in self.local_params)
            local = self.kernel_function(self.name + LOCAL, ids)
        self.whole_grid_entry(local or func)
        return self.module

    def kernel_function(self, name: str, local: frozenset) -> ir.Function:
        """`void name(i64 start, i64 end, i64* args)`; atomics on the arrays in `local` become plain adds."""
        self.values, self.arrays, self.accumulators, self.loop_sums = {}, {}, {}, set()
        self.local = local
        fnty = ir.FunctionType(ir.VoidType(), [I64, I64, I64.as_pointer()])
        func = ir.Function(self.module, fnty, name=name)
        func.attributes.add("nounwind")
        start, end, args = func.args
        args.add_attribute("noalias")
        entry = func.append_basic_block("entry")
        b = ir.IRBuilder(entry)
        self.func = func
        slot = lambda k: b.load(b.gep(args, [ir.Constant(I64, k)], inbounds=True))  # noqa: E731
        self.dims = [slot(k) for k in range(4)]
        self.fault = b.inttoptr(slot(4), I64.as_pointer())
        self.private: dict = {}
        for k, (p, (off, kind, t)) in enumerate(zip(self.fn.params, self.layout.slots)):
            if kind == "array":
                st = storage_type(t.scalar)
                ptr = b.inttoptr(slot(off), st.as_pointer())
                extents = [slot(off + 1 + k) for k in range(t.ndim)]
                self.arrays[p.value.id] = (ptr, extents, t)
                if k in self.layout.private:
                    self.private[p.value.id] = b.inttoptr(slot(self.layout.private[k]), st.as_pointer())
                self.values[p.value.id] = ptr
            else:
                raw = slot(off)
                self.values[p.value.id] = self.scalar_from_slot(b, raw, t)
        if self.uses_stack:
            self.stack = b.alloca(ir.ArrayType(I64, self.stack_size), name="stack")
            self.sp = b.alloca(I32, name="sp")
        for ins in self.fn.walk():
            key = self.reductions.get(id(ins))
            if key is not None and key not in self.accumulators:
                st = ins.args[0].type.scalar
                acc_t = F64 if st.is_float else llvm_type(st)
                acc = b.alloca(acc_t, name="partial")
                b.store(ir.Constant(acc_t, 0.0 if st.is_float else 0), acc)
                self.accumulators[key] = (acc, ins)
        self.native_accs = native.accumulators(self, b)
        if self.fn.attrs.get("tid_ndim", 1) == 1:
            self.flat_loop(b, start, end)
        else:
            self.row_loops(b, start, end)
        for acc, ins in self.accumulators.values():
            # One atomic per thread range instead of one per thread (reductions onto a fixed element).
            addr, _, _ = self.address(b, ins)
            st = ins.args[0].type.scalar
            total = b.load(acc)
            if st.is_float:
                total = b.fptrunc(total, F32) if st is T.float32 else total
                b.atomic_rmw("fadd", addr, total, "monotonic")
            else:
                b.atomic_rmw("add", addr, total, "monotonic")
        b.ret_void()
        return func

    def stream_tag(self):
        """The TBAA access tag that marks a streamed store (jit.mark_nontemporal makes the vector ones
        non-temporal after -O3, the loop vectorizer keeping the tag where it would drop one of our own). Its
        own TBAA root says nothing about aliasing with anything else."""
        if self._stream_tag is None:
            m = self.module
            root = m.add_metadata([ir.MetaDataString(m, STREAM_TBAA)])
            kind = m.add_metadata([ir.MetaDataString(m, STREAM_TBAA + ".element"), root, ir.Constant(I64, 0)])
            self._stream_tag = m.add_metadata([kind, kind, ir.Constant(I64, 0)])
        return self._stream_tag

    def whole_grid_entry(self, func) -> None:
        """`void <name>_all(i64* args)`: the whole grid (the product of the dims in the block) on the calling
        thread (`func`: the local entry when there is one — one thread meets no other). One pointer argument makes the ctypes call of an inline launch ~0.45 µs cheaper than three
        (converting each int64 costs); the kernel itself is not inlined into it (no second copy to compile)."""
        func.attributes.add("noinline")
        fnty = ir.FunctionType(ir.VoidType(), [I64.as_pointer()])
        whole = ir.Function(self.module, fnty, name=self.name + ALL)
        whole.attributes.add("nounwind")
        (args,) = whole.args
        b = ir.IRBuilder(whole.append_basic_block("entry"))
        n = None
        for k in range(4):
            d = b.load(b.gep(args, [ir.Constant(I64, k)], inbounds=True))
            n = d if n is None else b.mul(n, d)
        b.call(func, [ir.Constant(I64, 0), n, args])
        b.ret_void()

    def text(self) -> str:
        """The module as LLVM IR text, with native snippets defined (see native.py) and the float32 math
        functions declared with their vector variants (mathlib.py; jit.optimize defines them)."""
        return native.define_natives(self.math.declare(assume_bundles(str(self.build()))), self.native_defs)

    def scalar_from_slot(self, b, raw, t):
        if t is T.float64:
            return b.bitcast(raw, F64)
        if t is T.float32:
            return b.bitcast(b.trunc(raw, I32), F32)
        if t.is_bool:
            return b.icmp_unsigned("!=", raw, ir.Constant(I64, 0))
        return b.trunc(raw, llvm_type(t)) if t.bits < 64 else raw

    # ------------------------------------------------------------------ regions
    def v(self, x):
        return self.values[x.id]

    def region(self, region: Region, b: ir.IRBuilder) -> list:
        for ins in region.body:
            self.instr(ins, b)
        return [self.v(y) for y in region.yields]

    def instr(self, ins: Instr, b: ir.IRBuilder) -> None:
        op = ins.op
        if op == Op.CONST:
            t = ins.result.type
            val = ins.attrs["value"]
            self.values[ins.result.id] = ir.Constant(llvm_type(t), int(bool(val)) if t.is_bool else
                                                     float(val) if t.is_float else int(val))
        elif op == Op.PRIM:
            self.values[ins.result.id] = self.prim(ins, b)
        elif op == Op.TID:
            self.values[ins.result.id] = self.coordinate(b, ins.attrs["axis"], ins.attrs["ndim"])
        elif op == Op.SHAPE:
            _, extents, _ = self.arrays[ins.args[0].id]
            self.values[ins.result.id] = b.trunc(extents[ins.attrs["axis"]], I32)
        elif op in MEMORY:
            self.memory(ins, b)
        elif op == Op.IF:
            self.if_(ins, b)
        elif op == Op.FOR:
            self.for_(ins, b)
        elif op == Op.WHILE:
            self.while_(ins, b)
        elif op == Op.PUSH:
            self.push(ins, b)
        elif op == Op.POP:
            self.pop(ins, b)
        elif op == Op.NATIVE:
            native.emit_native(self, ins, b)
        else:
            raise NotImplementedError(f"cpu backend: op '{op}'")

    def coordinate(self, b, axis: int, ndim: int):
        if self.coords is not None and len(self.coords) == ndim:
            return self.coords[axis]
        if ndim == 1:
            return b.trunc(self.tid, I32)
        inner = None
        for k in range(axis + 1, ndim):
            inner = self.dims[k] if inner is None else b.mul(inner, self.dims[k])
        q = self.tid if inner is None else b.udiv(self.tid, inner)
        if axis > 0:
            q = b.urem(q, self.dims[axis])
        return b.trunc(q, I32)

    def record_fault(self, b, code: int, site: int, value=None, extent=None, axis=None) -> None:
        old = b.cmpxchg(self.fault, ir.Constant(I64, 0), ir.Constant(I64, code), "monotonic", "monotonic")
        won = b.extract_value(old, 1)
        with b.if_then(won):
            for k, v in enumerate((ir.Constant(I64, site), value, extent, axis), start=1):
                if v is not None:
                    b.store(v, b.gep(self.fault, [ir.Constant(I64, k)]))

    def to_bits(self, b, v, t):
        if t is T.float64:
            return b.bitcast(v, I64)
        if t is T.float32:
            return b.zext(b.bitcast(v, I32), I64)
        if t.bits == 64:
            return v
        return b.zext(v, I64) if (t.is_bool or t is T.uint32) else b.sext(v, I64)

    def from_bits(self, b, raw, t):
        return self.scalar_from_slot(b, raw, t)

    def push(self, ins, b) -> None:
        (val,) = ins.args
        sp = b.load(self.sp)
        ok = b.icmp_signed("<", sp, ir.Constant(I32, self.stack_size))
        with b.if_else(ok) as (then, otherwise):
            with then:
                slot = b.gep(self.stack, [ir.Constant(I32, 0), sp])
                b.store(self.to_bits(b, self.v(val), val.type), slot)
                b.store(b.add(sp, ir.Constant(I32, 1)), self.sp)
            with otherwise:
                self.record_fault(b, STACK_OVERFLOW, ins.attrs["stack"])

    def pop(self, ins, b) -> None:
        sp = b.load(self.sp)
        ok = b.icmp_signed(">", sp, ir.Constant(I32, 0))
        top = b.sub(sp, ir.Constant(I32, 1))
        safe = b.select(ok, top, ir.Constant(I32, 0))
        raw = b.load(b.gep(self.stack, [ir.Constant(I32, 0), safe]))
        raw = b.select(ok, raw, ir.Constant(I64, 0))
        b.store(safe, self.sp)
        self.values[ins.result.id] = self.from_bits(b, raw, ins.result.type)

    # ------------------------------------------------------------------ memory
    def address(self, b, ins: Instr, private: bool = False):
        arr = ins.args[0]
        ptr, extents, t = self.arrays[arr.id]
        if private:
            ptr = self.private[arr.id]
        if self.streaming and arr.id in self.streamed:      # at [tid]: the 64-bit thread id itself
            idx = [self.tid]
        else:
            idx = [b.sext(self.v(a), I64) if self.v(a).type == I32 else self.v(a) for a in ins.args[1:1 + t.ndim]]
        lin = idx[0]
        for k in range(1, t.ndim):
            lin = b.add(b.mul(lin, extents[k]), idx[k])
        ncomp = t.dtype.ncomp
        if ncomp > 1:
            lin = b.add(b.mul(lin, ir.Constant(I64, ncomp)), ir.Constant(I64, ins.attrs["comp"] or 0))
        return b.gep(ptr, [lin], inbounds=True), idx, extents

    def memory(self, ins: Instr, b) -> None:
        if not self.debug or self.sites[id(ins)] in self.proven:
            self.access(ins, b)
            return
        arr = ins.args[0]
        _, extents, t = self.arrays[arr.id]
        idx = [b.sext(self.v(a), I64) for a in ins.args[1:1 + t.ndim]]
        bad_axis = None
        in_range = ir.Constant(I1, 1)
        for k in reversed(range(t.ndim)):
            ok_k = b.icmp_unsigned("<", idx[k], extents[k])
            in_range = b.and_(in_range, ok_k)
            bad_axis = ir.Constant(I64, k) if bad_axis is None else b.select(ok_k, bad_axis, ir.Constant(I64, k))
        bad_value = idx[0]
        bad_extent = extents[0]
        for k in range(1, t.ndim):
            first_bad = b.icmp_signed("==", bad_axis, ir.Constant(I64, k))
            bad_value = b.select(first_bad, idx[k], bad_value)
            bad_extent = b.select(first_bad, extents[k], bad_extent)
        ok_bb = self.func.append_basic_block("in_bounds")
        bad_bb = self.func.append_basic_block("out_of_bounds")
        merge = self.func.append_basic_block("bounds_done")
        b.cbranch(in_range, ok_bb, bad_bb)
        b.position_at_end(ok_bb)
        self.access(ins, b)
        ok_end = b.block
        b.branch(merge)
        b.position_at_end(bad_bb)
        self.record_fault(b, OUT_OF_BOUNDS, self.sites[id(ins)], bad_value, bad_extent, bad_axis)
        bad_end = b.block
        b.branch(merge)
        b.position_at_end(merge)
        if ins.results:
            r = ins.result
            phi = b.phi(llvm_type(r.type))
            phi.add_incoming(self.values[r.id], ok_end)
            phi.add_incoming(ir.Constant(llvm_type(r.type), 0), bad_end)
            self.values[r.id] = phi

    def access(self, ins: Instr, b) -> None:
        addr, _, _ = self.address(b, ins)
        st = ins.args[0].type.scalar
        if ins.op == Op.LOAD:
            val = b.load(addr)
            self.values[ins.result.id] = b.icmp_unsigned("!=", val, ir.Constant(I8, 0)) if st.is_bool else val
            return
        value = self.v(ins.args[-1])
        if ins.op == Op.STORE:
            store = b.store(b.zext(value, I8) if st.is_bool else value, addr)
            if self.streaming and ins.args[0].id in self.streamed:
                store.set_metadata("tbaa", self.stream_tag())
            return
        kind = ins.attrs["kind"]
        key = self.reductions.get(id(ins))
        if key is not None:
            acc, _ = self.accumulators[key]
            if st.is_float:
                v = b.fpext(value, F64) if st is T.float32 else value
                v = b.fneg(v) if kind == "sub" else v
                b.store(b.fadd(b.load(acc), v, flags=("reassoc", "nsz")), acc)
            else:
                v = b.sub(ir.Constant(value.type, 0), value) if kind == "sub" else value
                b.store(b.add(b.load(acc), v), acc)
            return
        if ins.args[0].id in self.private:
            paddr, _, _ = self.address(b, ins, private=True)
            old = b.load(paddr)
            b.store(self.combine(b, kind, old, value, st), paddr)
            self.values[ins.result.id] = old
            return
        if ins.attrs.get("exclusive") or ins.args[0].id in self.local:
            old = b.load(addr)
            b.store(self.combine(b, kind, old, value, st), addr)
            self.values[ins.result.id] = old
            return
        if st.is_float:
            op = {"add": "fadd", "sub": "fsub", "min": "fmin", "max": "fmax", "xchg": "xchg"}[kind]
        elif st is T.uint32:
            op = {"add": "add", "sub": "sub", "min": "umin", "max": "umax", "xchg": "xchg"}[kind]
        else:
            op = kind
        self.values[ins.result.id] = b.atomic_rmw(op, addr, value, "monotonic")

    def combine(self, b, kind, old, value, st):
        if kind == "xchg":
            return value
        if kind == "add":
            return b.fadd(old, value) if st.is_float else b.add(old, value)
        if kind == "sub":
            return b.fsub(old, value) if st.is_float else b.sub(old, value)
        return self.minmax(b, kind, old, value, st)

    def minmax(self, b, kind, x, y, t):
        if t.is_float:     # NaN-propagating, as NumPy's minimum/maximum (minnum/maxnum would drop a NaN)
            name = "llvm.minimum" if kind == "min" else "llvm.maximum"
            return b.call(self.module.declare_intrinsic(name, [x.type], ir.FunctionType(x.type, [x.type, x.type])),
                          [x, y])
        cmp = b.icmp_unsigned if t is T.uint32 else b.icmp_signed
        return b.select(cmp("<" if kind == "min" else ">", x, y), x, y)

    # ------------------------------------------------------------------ prims
    def prim(self, ins: Instr, b):
        folded = self.folds.get(id(ins)) if self.interior else None
        return emit_prim(self, ins, b) if folded is None else folded
