"""The walk over one kernel that the C-style emitter (backends/cstyle.py) shares between dialects: every
SSA value a C variable, structured regions as C blocks, loads/stores/atomics with debug bounds checks, the
reverse pass's value stack, reduction accumulators and `@gk.func_native` snippets as C functions. A dialect
subclasses `CStyleKernel` and writes the kernel around the body (`build`) and its atomics."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..core import types as T
from ..core.errors import CompileError
from ..core.ir import Function, Instr, Region, Value, used_ids
from ..core.ops import MEMORY, Op
from .analysis import reduction_sites
from .base import OUT_OF_BOUNDS, STACK_OVERFLOW, bounds_sites

if TYPE_CHECKING:
    from .cstyle import CStyleLanguage

R = "@"   # placeholder for the variable receiving a memory op's result in emitted statements

@dataclass
class ArrayInfo:
    """How generated code names an array parameter and which of its extents it receives."""

    name: str
    type: T.ArrayType
    extents: dict[int, str] = field(default_factory=dict)    # axis -> C name of the extent


def ident(text: str) -> str:
    """A C identifier fragment made of `text` (hints and parameter names)."""
    return re.sub(r"\W", "_", text)[:24]


class CStyleKernel:
    """Emits one kernel's body: every SSA value a C variable, structured regions as C blocks, loop-carried
    values and region results as variables assigned before a loop and at the end of each iteration.

    A dialect subclasses it and writes `build()` (the kernel around the body: signature, thread index,
    reductions' epilogue) and `atomic()`; the rest is shared. Args: fn (lowered IR), name (the C kernel
    name), lang (the dialect), backend (the registry name keying native snippets), debug (bounds checks),
    stack_size (value-stack slots per thread), ops (the prim table; default lang.code_for_op)."""

    def __init__(self, fn: Function, name: str, *, lang: CStyleLanguage, backend: str, debug: bool,
                 stack_size: int, ops: dict | None = None, proven: frozenset = frozenset()):
        self.fn, self.name, self.lang, self.backend = fn, name, lang, backend
        self.debug, self.stack_size = debug, stack_size
        self.proven = proven          # bounds sites the launch proves in bounds: unchecked under debug
        self.ops = ops if ops is not None else lang.code_for_op
        self.kernel_name = fn.attrs.get("source_name", fn.name)
        self.lines: list[str] = []
        self.names: dict[int, str] = {}
        self.arrays: dict[int, ArrayInfo] = {}
        self.used = used_ids(fn)
        self.sites = {id(ins): k for k, ins in enumerate(bounds_sites(fn))} if debug else {}
        self.uses_stack = any(ins.op == Op.PUSH for ins in fn.walk())
        self.can_fault = debug or self.uses_stack
        self.reductions = {} if debug else reduction_sites(fn)
        self.accs: dict = {}                  # reduction key -> (accumulator name, instruction, C type)
        self.native_defs: dict[str, str] = {}  # @gk.func_native snippets as functions
        self.tid_ndims = {ins.attrs["ndim"] for ins in fn.walk() if ins.op == Op.TID}

    # ------------------------------------------------------------------ naming
    def var(self, v: Value) -> str:
        name = self.names.get(v.id)
        if name is None:
            name = self.names[v.id] = f"v{len(self.names)}" + (f"_{ident(v.hint)}" if v.hint else "")
        return name

    def decl(self, v: Value) -> str:
        return f"{self.lang.ctype(v.type)} {self.var(v)}"

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def error(self, message: str) -> CompileError:
        return CompileError(f"in kernel '{self.kernel_name}': {message}")

    # ------------------------------------------------------------------ what the kernel needs
    def uses_float64(self) -> bool:
        for p in self.fn.params:
            if p.value.id in self.used and (p.type.scalar if p.type.is_array else p.type) is T.float64:
                return True
        for ins in self.fn.walk():
            values = ins.results + [p for r in ins.regions for p in r.params]
            if any(v.type is T.float64 for v in values):
                return True
        return False

    def needed_extents(self) -> dict[int, set]:
        """Per array value id, the axes whose extent the code reads (all of them under bounds checks)."""
        need: dict[int, set] = {}
        for ins in self.fn.walk():
            if ins.op in MEMORY:
                nd = ins.args[0].type.ndim
                need.setdefault(ins.args[0].id, set()).update(range(0 if self.debug else 1, nd))
            elif ins.op == Op.SHAPE:
                need.setdefault(ins.args[0].id, set()).add(ins.attrs["axis"])
        return need

    def coordinates(self, d: int) -> None:
        """Row-major coordinates of the linear thread id `gk_gid` for each multi-dimensional tid (the launch
        extents are `gk_d0..`)."""
        i32, i64 = self.lang.type_names["int32"], self.lang.type_names["int64"]
        for nd in sorted(n for n in self.tid_ndims if n > 1):
            self.emit(d, f"{i64} gk_rest{nd} = gk_gid;")
            for axis in range(nd - 1, 0, -1):
                self.emit(d, f"const {i32} gk_c{nd}_{axis} = ({i32})(gk_rest{nd} % gk_d{axis}); "
                             f"gk_rest{nd} /= gk_d{axis};")
            self.emit(d, f"const {i32} gk_c{nd}_0 = ({i32})gk_rest{nd};")

    def stack_capacity(self) -> str:
        """The value stack's capacity in slots, as a C expression."""
        return str(self.stack_size)

    # ------------------------------------------------------------------ regions and instructions
    def region(self, region: Region, depth: int) -> list[str]:
        for ins in region.body:
            self.instr(ins, depth)
        return [self.var(y) for y in region.yields]

    def instr(self, ins: Instr, d: int) -> None:
        op, lang = ins.op, self.lang
        if op == Op.CONST:
            value = lang.literal(ins.attrs["value"], ins.result.type)
            self.emit(d, f"const {self.decl(ins.result)} = {value};")
        elif op == Op.PRIM:
            self.emit(d, f"const {self.decl(ins.result)} = {self.prim(ins)};")
        elif op == Op.TID:
            nd, axis = ins.attrs["ndim"], ins.attrs["axis"]
            coord = f"({lang.type_names['int32']})gk_gid" if nd == 1 else f"gk_c{nd}_{axis}"
            self.emit(d, f"const {self.decl(ins.result)} = {coord};")
        elif op == Op.SHAPE:
            info = self.arrays[ins.args[0].id]
            self.emit(d, f"const {self.decl(ins.result)} = ({lang.type_names['int32']})"
                         f"{info.extents[ins.attrs['axis']]};")
        elif op in MEMORY:
            self.access(ins, d)
        elif op == Op.IF:
            self.if_(ins, d)
        elif op == Op.FOR:
            self.for_(ins, d)
        elif op == Op.WHILE:
            self.while_(ins, d)
        elif op == Op.PUSH:
            v = ins.args[0]
            bits, site = lang.to_bits(self.var(v), v.type), int(ins.attrs["stack"])
            self.emit(d, f"if (gk_sp < {self.stack_capacity()}) gk_stack[gk_sp++] = {bits};")
            self.emit(d, f"else gk_fault(gk_fault_rec, {STACK_OVERFLOW}, {site}, 0, 0, 0);")
        elif op == Op.POP:
            raw = "(gk_sp > 0 ? gk_stack[--gk_sp] : 0UL)"
            self.emit(d, f"const {self.decl(ins.result)} = {lang.from_bits(raw, ins.result.type)};")
        elif op == Op.NATIVE:
            self.native(ins, d)
        else:
            raise self.error(f"the {lang.name} backend cannot compile IR op '{op}' (is the IR lowered?)")

    def prim(self, ins: Instr) -> str:
        name = ins.attrs["name"]
        fmt = self.lang.formatter(self.ops, name)
        if fmt is None:
            raise self.error(f"the {self.lang.name} backend has no code for builtin '{name}'")
        t = ins.args[0].type if ins.args else ins.result.type
        if name == "where":
            t = ins.args[1].type
        return fmt([self.var(a) for a in ins.args], t, ins.attrs)

    def results_decl(self, results: list[Value], inits: list[str] | None, d: int) -> list[str]:
        """Declare a mutable C variable per region result / carried value (zero or `inits`)."""
        for k, r in enumerate(results):
            self.emit(d, f"{self.decl(r)} = {inits[k] if inits is not None else '0'};")
        return [self.var(r) for r in results]

    def assign(self, targets: list[str], values: list[str], d: int) -> None:
        for t, v in zip(targets, values):
            if t != v:
                self.emit(d, f"{t} = {v};")

    def bind_params(self, params: list[Value], values: list[str], d: int) -> None:
        for p, v in zip(params, values):
            self.emit(d, f"const {self.decl(p)} = {v};")

    def if_(self, ins: Instr, d: int) -> None:
        out = self.results_decl(ins.results, None, d)
        then, other = ins.regions
        self.emit(d, f"if ({self.var(ins.args[0])}) {{")
        self.assign(out, self.region(then, d + 1), d + 1)
        if other.body or out:
            self.emit(d, "} else {")
            self.assign(out, self.region(other, d + 1), d + 1)
        self.emit(d, "}")

    def for_(self, ins: Instr, d: int) -> None:
        start, stop, step, *inits = [self.var(a) for a in ins.args]
        (body,) = ins.regions
        acc = self.results_decl(ins.results, inits, d)
        iv = body.params[0]
        s = ins.args[2].const_value
        cond = (f"{self.var(iv)} < {stop}" if s > 0 else f"{self.var(iv)} > {stop}") if s is not None else \
            f"({step} > 0 ? {self.var(iv)} < {stop} : {self.var(iv)} > {stop})"
        self.emit(d, f"for ({self.decl(iv)} = {start}; {cond}; {self.var(iv)} += {step}) {{")
        self.bind_params(body.params[1:], acc, d + 1)
        self.assign(acc, self.region(body, d + 1), d + 1)
        self.emit(d, "}")

    def while_(self, ins: Instr, d: int) -> None:
        cond, body = ins.regions
        acc = self.results_decl(ins.results, [self.var(a) for a in ins.args], d)
        self.emit(d, "for (;;) {")
        self.bind_params(cond.params, acc, d + 1)
        (c,) = self.region(cond, d + 1)
        self.emit(d + 1, f"if (!{c}) break;")
        self.bind_params(body.params, acc, d + 1)
        self.assign(acc, self.region(body, d + 1), d + 1)
        self.emit(d, "}")

    # ------------------------------------------------------------------ memory
    def linear_index(self, info: ArrayInfo, idx: list[str], comp: int | None) -> str:
        """The flat scalar offset of element `idx`, component `comp`, in a row-major array."""
        lin = f"({self.lang.type_names['int64']}){idx[0]}"
        for k in range(1, info.type.ndim):
            lin = f"({lin} * {info.extents[k]} + {idx[k]})"
        ncomp = info.type.dtype.ncomp
        return f"({lin} * {ncomp} + {comp or 0})" if ncomp > 1 else lin

    def access(self, ins: Instr, d: int) -> None:
        """One load/store/atomic; with `debug`, the index is checked first and a fault recorded instead."""
        info = self.arrays[ins.args[0].id]
        st = info.type.scalar
        idx = [self.var(a) for a in ins.args[1:1 + info.type.ndim]]
        ptr = f"{info.name}[{self.linear_index(info, idx, ins.attrs.get('comp'))}]"
        res = ins.results[0] if ins.results else None
        wanted = res is not None and (ins.op == Op.LOAD or res.id in self.used)
        if ins.op == Op.LOAD:
            stmts = [f"{R} = {ptr} != 0" if st.is_bool else f"{R} = {ptr}"]
        elif ins.op == Op.STORE:
            to_byte = f"({self.lang.memtype(st)})" if st.is_bool else ""
            stmts = [f"{ptr} = {to_byte}{self.var(ins.args[-1])}"]
        else:
            stmts = self.atomic_statements(ins, ptr, st, wanted)
        name = self.var(res) if wanted else ""
        stmts = [s.replace(R, name) for s in stmts]
        if not self.debug or self.sites[id(ins)] in self.proven:
            if wanted and len(stmts) == 1 and stmts[0].startswith(f"{name} = "):
                self.emit(d, f"const {self.decl(res)} = {stmts[0][len(name) + 3:]};")
                return
            if wanted:
                self.emit(d, f"{self.decl(res)};")
            for s in stmts:
                self.emit(d, s + ";")
            return
        if wanted:
            self.emit(d, f"{self.decl(res)} = 0;")       # an out-of-range load gives 0
        i64, u64 = self.lang.type_names["int64"], self.lang.type_names["uint64"]
        extents = [info.extents[k] for k in range(info.type.ndim)]
        checks = " && ".join(f"({u64}){i} < ({u64}){n}" for i, n in zip(idx, extents))
        self.emit(d, f"if ({checks}) {{")
        for s in stmts:
            self.emit(d + 1, s + ";")
        self.emit(d, "} else {")
        site = self.sites[id(ins)]
        for k, (i, n) in enumerate(zip(idx, extents)):
            self.emit(d + 1, f"{'else ' if k else ''}if (({u64}){i} >= ({u64}){n}) "
                             f"gk_fault(gk_fault_rec, {OUT_OF_BOUNDS}, {site}, ({i64}){i}, {n}, {k});")
        self.emit(d, "}")

    def atomic_statements(self, ins: Instr, ptr: str, st: T.ScalarType, wanted: bool) -> list[str]:
        """Statements performing an atomic; `R` stands for the variable receiving the old value. Reductions
        add into their accumulator, exclusive atomics are a plain read-modify-write, the rest `atomic()`."""
        kind, v = ins.attrs["kind"], self.var(ins.args[-1])
        key = self.reductions.get(id(ins))
        if key is not None:
            acc, _, acc_t = self.accs[key]
            return [f"{self.accumulator_ref(acc)} {'+=' if kind == 'add' else '-='} ({acc_t}){v}"]
        if st.is_bool:
            raise self.error("atomics on bool arrays are not supported")
        if kind not in ("add", "sub", "min", "max", "xchg"):
            raise self.error(f"unknown atomic kind '{kind}'")
        if ins.attrs.get("exclusive"):
            old = R if wanted else ptr
            new = {"add": f"{old} + {v}", "sub": f"{old} - {v}", "xchg": v}.get(kind) or \
                self.lang.plain_minmax(kind, old, v, st)
            return ([f"{R} = {ptr}"] if wanted else []) + [f"{ptr} = {new}"]
        take = f"{R} = " if wanted else ""
        if ins.attrs.get("cas"):            # a kind the backend does not declare: a CAS loop (lowering)
            return [take + self.lang.cas_atomic(kind, ptr, v, st)]
        return [take + self.atomic(kind, ptr, v, st)]

    def atomic(self, kind: str, ptr: str, v: str, st: T.ScalarType) -> str:
        """An expression atomically applying `kind` (add, sub, min, max, xchg) with `v` to element `ptr` (an
        lvalue) and giving its old value."""
        raise NotImplementedError(f"the {self.lang.name} kernel emitter must spell atomics")

    def accumulator_ref(self, acc: str) -> str:
        """How the thread body names a reduction accumulator."""
        return acc

    def accumulator_type(self, st: T.ScalarType) -> str:
        """The C type partial sums onto an element of type `st` are kept in (float sums in double)."""
        return "double" if st.is_float else self.lang.ctype(st)

    def declare_reductions(self) -> None:
        """One private accumulator per reduction element (backends.analysis.reduction_sites)."""
        for ins in self.fn.walk():
            key = self.reductions.get(id(ins))
            if key is None or key in self.accs:
                continue
            st = ins.args[0].type.scalar
            self.accs[key] = (f"gk_acc{len(self.accs)}", ins, self.accumulator_type(st))

    def reduction_target(self, ins: Instr) -> str:
        """The element a reduction's accumulator is finally added onto (an lvalue)."""
        info = self.arrays[ins.args[0].id]
        idx = [str(int(i.const_value)) for i in ins.args[1:1 + info.type.ndim]]
        return f"{info.name}[{self.linear_index(info, idx, ins.attrs.get('comp'))}]"

    # ------------------------------------------------------------------ @gk.func_native
    def native(self, ins: Instr, d: int) -> None:
        """A snippet (keyed by this backend's name) as a C function: parameters keep their names, scalars by
        value, arrays as pointers to their flat data. The adjoint function also receives `adj_ret`, an
        `adj_<p>` pointer per float array, and declares a local `adj_<p> = 0` per float scalar that the
        snippet adds into; its final value is handed back to the kernel."""
        lang = self.lang
        spec, variant = ins.attrs["native"], ins.attrs["variant"]
        body = spec.snippet(self.backend, variant)
        n = len(spec.params)

        def param(name: str, t) -> str:
            if t.is_array:
                return f"{lang.global_qualifier}{lang.ctype(t.scalar)}* {name}"
            return f"{lang.ctype(t)} {name}"

        def arg(v: Value) -> str:
            return self.arrays[v.id].name if v.type.is_array else self.var(v)

        params = [param(name, t) for name, t in spec.params]
        args = [arg(a) for a in ins.args[:n]]
        digest = hashlib.sha256(body.encode()).hexdigest()[:10]
        name = f"gk_native_{spec.name}_{variant}_{digest}"
        if variant != "adjoint":
            ret = lang.ctype(spec.ret_type) if spec.ret_type is not None else "void"
            self.native_defs.setdefault(name, f"{lang.function_prefix} {ret} {name}({', '.join(params)})\n"
                                              f"{{\n{body}\n}}\n")
            call = f"{name}({', '.join(args)})"
            if ins.results:
                self.emit(d, f"const {self.decl(ins.results[0])} = {call};")
            else:
                self.emit(d, f"{call};")
            return
        if spec.ret_type is not None:
            params.append(f"{lang.ctype(spec.ret_type)} adj_ret")
        for k in spec.float_arrays():
            pname, t = spec.params[k]
            params.append(param(f"adj_{pname}", t))
        scalars = [spec.params[k] for k in spec.float_scalars()]
        params += [f"{lang.ctype(t)}* gk_out_adj_{pname}" for pname, t in scalars]
        locals_ = "".join(f"    {lang.ctype(t)} adj_{pname} = 0;\n" for pname, t in scalars)
        outs = "".join(f"    *gk_out_adj_{pname} = adj_{pname};\n" for pname, _ in scalars)
        self.native_defs.setdefault(name, f"{lang.function_prefix} void {name}({', '.join(params)})\n{{\n"
                                          f"{locals_}    {{\n{body}\n    }}\n{outs}}}\n")
        for r in ins.results:
            self.emit(d, f"{self.decl(r)} = 0;")
        args += [arg(a) for a in ins.args[n:]] + [f"&{self.var(r)}" for r in ins.results]
        self.emit(d, f"{name}({', '.join(args)});")

    def natives_source(self) -> str:
        return "".join(f"/* @gk.func_native */\n{code}\n" for code in self.native_defs.values())
