"""Taichi kernel → gradkit kernels: how a `@ti.kernel` runs on gradkit.

The kernel's Python source is parsed with `ast` (gradkit's SourceInfo: file, lines, first line) and split
at its top level: each top-level `for` (over `range`, `ti.ndrange`, `ti.grouped`, or a field: struct-for)
becomes one parallel gk.kernel launched over the loop's extent, and each run of other statements one
serial gk.kernel launched with one thread (a top-level `for ... in ti.static(...)` is serial code).
The statements are rewritten into gradkit's kernel language (rewrite.py):

- every global field the code names (`x`, `self.x`, `x.grad`, a field passed as a `ti.template()`
  argument) becomes an array parameter `__ti_f<k>` of the generated kernel; the launch passes the field's
  gk.array, so tapes, hazards and the debugger see ordinary launches;
- the kernel's scalar arguments become scalar parameters of the same names;
- the loop variable is rebuilt from `gk.tid()` plus the range's start (a parameter, evaluated on the host
  with the arguments at each call, as are the extents);
- `@ti.func` calls become `__ti_call<k>` macros that inline the function's (rewritten) body into the
  caller, as Taichi inlines; vector/matrix methods (`v.norm()`) become `__ti_m_<name>` macros (lang.py);
  field stores cast to the field's type, vector indices (`grid[base + offset]`), `ti.atomic_*` on field
  elements and Taichi's "a local keeps its first type" become the `__ti_*` macros of macros.py;
- list literals become tuples (for `ti.Vector([...])`); `assert` is dropped (with a note); `print` is
  Taichi's print (printing.py), except of an f-string (dropped, with a note).

Top-level locals assigned in serial code are recomputed in the later launches that use them.
Every generated node keeps the line and column of the Taichi source it came from, and the generated
gk.kernel compiles from a SourceInfo holding the user's file and lines (`__gk_source__`), so compile errors
point at the user's Taichi source line.
"""

from __future__ import annotations

import ast
import builtins as py_builtins
import copy

import gradkit as gk
from gradkit.core.frontend.source import SourceInfo

from . import lang, runtime
from .errors import unsupported
from .rewrite import Rewriter
from .scope import Shared, _call, _loc, _name, local_names, namespace_of


# ------------------------------------------------------------------ kernels
class Launch:
    """One generated gk.kernel and how to launch it: its field parameters, the Taichi kernel's scalar
    arguments it takes, and (for a parallel loop) the host code giving its extent and starts."""

    def __init__(self, kernel, fields, args, bounds, random, ret, line):
        self.kernel, self.fields, self.args, self.bounds = kernel, fields, args, bounds
        self.random, self.ret, self.line = random, ret, line

    def extents(self, hostns: dict):
        if self.bounds is None:
            return (1,), []
        los, dims = [], []
        for lo, hi in self.bounds:
            a, b = eval(lo, hostns), eval(hi, hostns)  # noqa: S307 - the user's own loop bounds
            los.append(int(a))
            dims.append(max(0, int(b) - int(a)))
        return tuple(dims), los


class Translation:
    """A Taichi kernel translated for one set of compile-time arguments (templates, self)."""

    def __init__(self, launches, host_assigns, ret_field):
        self.launches, self.host_assigns, self.ret_field = launches, host_assigns, ret_field


def _uses_names(stmts) -> set:
    return {n.id for st in stmts for n in ast.walk(st) if isinstance(n, ast.Name)}


def translate(tikernel, static: dict, arg_types: dict, ret_type) -> Translation:
    """Split and rewrite `tikernel` (a TiKernel) into launches; `static`: parameter -> compile-time object
    (self, template arguments); `arg_types`: scalar parameter -> gk type, in order."""
    py = tikernel.pyfunc
    src = SourceInfo(py)
    fdef = src.tree
    shared = Shared()
    ns = {**namespace_of(py), **static}
    locals_ = local_names(fdef, set(static))
    ret_field = None
    if ret_type is not None:
        from .fields import Field as F
        ret_field = F(ret_type, ())
    body = [st for st in fdef.body if not (isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant))]
    for n in ast.walk(ast.Module(body=body[:-1], type_ignores=[])):
        if isinstance(n, ast.Return):
            raise src.error(n, "gradkit.taichi supports `return` in a kernel only as its last statement")
    segments, serial = [], []
    for st in body:
        if isinstance(st, ast.For) and not Rewriter(shared, ns, locals_, src, "").is_static_call(st.iter):
            if serial:
                segments.append(("serial", serial))
                serial = []
            segments.append(("loop", st))
        else:
            serial.append(st)
    if serial:
        segments.append(("serial", serial))
    launches, host_assigns, carried = [], [], []     # carried: top-level local assignments so far
    for k, (kind, part) in enumerate(segments):
        rw = Rewriter(shared, {**ns, **shared.helpers}, locals_, src, f"kernel '{py.__name__}'")
        defined = set(arg_types)
        if kind == "serial":
            # top-level locals a loop bound may use, as the user wrote them: rw.body rewrites statements in
            # place (field names become kernel parameters), and the host evaluates these in its namespace
            host_assigns += [copy.deepcopy(st) for st in part
                             if isinstance(st, ast.Assign) and all(isinstance(t, ast.Name) for t in st.targets)]
            stmts = rw.body(part, defined)
            if stmts and isinstance(stmts[-1], ast.Return):
                if ret_field is None:
                    raise src.error(stmts[-1], "this kernel returns a value: annotate its return type "
                                               "(def k() -> ti.f32)")
                r = stmts[-1]
                p = rw.field_name(ret_field, r)
                stmts[-1] = _loc(ast.Assign(targets=[_loc(ast.Subscript(value=_name(p.id, r), slice=ast.Constant(
                    value=None), ctx=ast.Store()), r)], value=_call("__ti_as", [_name(p.id, r), r.value], r)), r)
            bounds, prologue, node = None, [], part[0]
        else:
            node = part
            stmts, bounds, prologue = loop_kernel(rw, part, defined)
            if rw.bitwise is not None:
                raise unsupported(f"ti.atomic_and / atomic_or / atomic_xor inside a parallel loop ({rw.bitwise}: "
                                  "gradkit has no bitwise atomics)",
                                  "use them in the kernel's serial code, or combine with ti.atomic_max/min/add")
        # top-level locals of earlier serial code that this launch reads: recomputed here
        need = _uses_names(stmts)
        pre = []
        for st in reversed(carried):
            tnames = {t.id for t in st.targets}
            if tnames & need:
                pre.insert(0, st)
                need |= _uses_names([st])
        pre_rw = [rw.visit(copy.deepcopy(st)) for st in pre]
        if rw.random:
            seed = [_loc(ast.Assign(targets=[_loc(ast.Name(id="__ti_rng", ctx=ast.Store()), node)],
                                    value=_call("__ti_rand_init", [_name("__ti_seed", node),
                                                                   _name("__ti_lin", node)], node)), node)]
        else:
            seed = []
        stmts = prologue + pre_rw + seed + stmts if kind == "loop" else pre_rw + seed + stmts
        if kind == "serial":
            stmts = ([_loc(ast.Assign(targets=[_loc(ast.Name(id="__ti_lin", ctx=ast.Store()), node)],
                                      value=ast.Constant(value=0)), node)] if rw.random else []) + stmts
            carried += [st for st in part if isinstance(st, ast.Assign)
                        and all(isinstance(t, ast.Name) for t in st.targets)]
        used = rw.uses | {u for i in shared.inlines.values() if i.name in rw.uses for u in i.uses}
        fparams = [(name, f) for name, f in shared.fields.values() if name in used]
        names_used = _uses_names(stmts)
        sparams = [a for a in arg_types if a in names_used]
        launches.append(build_kernel(tikernel, py, src, fdef, k, kind, stmts, fparams, sparams, arg_types,
                                     bounds, rw.random, ns, shared, node))
    return Translation(launches, host_assigns, ret_field)


def loop_kernel(rw: Rewriter, node: ast.For, defined: set):
    """A top-level loop: (statements, host bounds, prologue) of its parallel kernel."""
    if node.orelse:
        raise rw.error(node, "for-else is not supported")
    dims = rw.loop_dims(node.iter)
    if dims is None:
        it = node.iter
        if rw.static(it.func) is py_builtins.reversed:
            raise rw.error(it, "a top-level (parallel) loop cannot be reversed(...)")
        if len(it.args) == 1:
            bounds, grouped = [(ast.Constant(value=0), it.args[0])], False
        elif len(it.args) == 2:
            bounds, grouped = [(it.args[0], it.args[1])], False
        else:
            raise rw.error(it, "a top-level (parallel) range loop takes range(stop) or range(start, stop)")
    else:
        bounds, grouped = dims
    n = len(bounds)
    if n > 4:
        raise rw.error(node.iter, "gradkit launches have at most 4 dimensions")
    targets = rw.target_names(node, n, grouped)
    tids = [f"__ti_t{k}" for k in range(n)]
    pro = []
    tid_call = _loc(ast.Call(func=_loc(ast.Attribute(value=_name("__ti_gk", node), attr="tid", ctx=ast.Load()),
                                       node), args=[], keywords=[]), node)
    tgt = _loc(ast.Name(id=tids[0], ctx=ast.Store()), node) if n == 1 else \
        _loc(ast.Tuple(elts=[_loc(ast.Name(id=t, ctx=ast.Store()), node) for t in tids], ctx=ast.Store()), node)
    pro.append(_loc(ast.Assign(targets=[tgt], value=tid_call), node))
    idx = []
    for k, (lo, _) in enumerate(bounds):
        if isinstance(lo, ast.Constant) and lo.value == 0:
            idx.append(_name(tids[k], node))
        else:
            idx.append(_loc(ast.BinOp(left=_name(tids[k], node), op=ast.Add(), right=_name(f"__ti_lo{k}", node)),
                            node))
    lin = idx[0]
    for e in idx[1:]:
        lin = _loc(ast.BinOp(left=_loc(ast.BinOp(left=lin, op=ast.Mult(), right=ast.Constant(value=7919)), node),
                             op=ast.Add(), right=e), node)
    if grouped:
        rw.grouped.add(targets[0])
        pro.append(_loc(ast.Assign(targets=[_loc(ast.Name(id=targets[0], ctx=ast.Store()), node)],
                                   value=_call("__ti_ivec", idx, node)), node))
    else:
        for t, e in zip(targets, idx):
            pro.append(_loc(ast.Assign(targets=[_loc(ast.Name(id=t, ctx=ast.Store()), node)], value=e), node))
    body = node.body
    stmts = rw.body(body, defined | set(targets))
    if _continues(body):       # `continue` in the parallel loop: one pass of a loop it can leave
        stmts = [_loc(ast.For(target=_loc(ast.Name(id="__ti_once", ctx=ast.Store()), node),
                              iter=_call("range", [ast.Constant(value=1)], node), body=stmts, orelse=[]), node)]
    if rw.random:
        pro.append(_loc(ast.Assign(targets=[_loc(ast.Name(id="__ti_lin", ctx=ast.Store()), node)], value=lin),
                        node))
    host = [(_host_code(lo, rw.src), _host_code(hi, rw.src)) for lo, hi in bounds]
    return stmts, host, pro


def _host_code(expr, src):
    e = ast.Expression(body=copy.deepcopy(expr))
    ast.fix_missing_locations(e)
    return compile(e, src.file, "eval")


def _continues(stmts) -> bool:
    for st in stmts:
        if isinstance(st, ast.Continue):
            return True
        if isinstance(st, (ast.For, ast.While)):
            continue
        for field in ("body", "orelse"):
            inner = getattr(st, field, None)
            if isinstance(inner, list) and _continues(inner):
                return True
    return False


def build_kernel(tikernel, py, src, fdef, k, kind, stmts, fparams, sparams, arg_types, bounds, random, ns,
                 shared, node) -> Launch:
    """The gk.kernel of one launch, compiled from the rewritten statements with the user's locations."""
    name = f"{py.__name__}_{k}_{'loop' if kind == 'loop' else 'serial'}_L{src.first_line + node.lineno - 1}"
    params = [p for p, _ in fparams] + list(sparams)
    if bounds is not None:
        params += [f"__ti_lo{j}" for j, (lo, _) in enumerate(bounds)]
    if random:
        params.append("__ti_seed")
    anns = {}
    for p, f in fparams:
        anns[p] = gk.array(dtype=f.elem, ndim=max(1, len(f.shape)))
    for a in sparams:
        anns[a] = arg_types[a]
    for p in params:
        if p.startswith("__ti_lo") or p == "__ti_seed":
            anns[p] = gk.int32
    new = ast.FunctionDef(name=name, args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=p) for p in params],
                                                        vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
                                                        defaults=[]),
                          body=stmts or [ast.Pass()], decorator_list=[], returns=None, type_params=[])
    _loc(new, fdef)
    for a in new.args.args:
        _loc(a, fdef)
    info = copy.copy(src)
    info.tree = new
    info.name = name
    code = compile(f"def {name}({', '.join(params)}):\n    pass\n", src.file, "exec")
    glb = py.__globals__
    scope: dict = {}
    exec(code, glb, scope)  # noqa: S102 - a stub with the generated signature; its body is never run
    stub = scope[name]
    stub.__annotations__ = anns
    stub.__gk_source__ = info
    stub.__gk_promote_ints__ = True         # Taichi's int op float → float
    stub.__gk_builtins__ = {"min": lang.min, "max": lang.max}    # bare min / max are ti.min / ti.max
    ker = gk.Kernel(stub, default_fp=runtime.settings.default_fp)
    helpers = {k2: v for k2, v in ns.items() if k2 not in glb or glb[k2] is not v}
    helpers.update(shared.helpers)
    helpers["__ti_rand_init"] = gk.rand_init
    stub.__gk_enclosing__ = helpers
    if "__gk_lines__" not in stub.__dict__:
        stub.__gk_lines__ = (src.file, src.lines)
    return Launch(ker, [f for _, f in fparams], list(sparams), bounds, random, None, node.lineno)


def debug_source(translation) -> str:
    """The generated kernels as Python text (for error reports and the porting page's examples)."""
    out = []
    for launch in translation.launches:
        out.append(ast.unparse(launch.kernel.pyfunc.__gk_source__.tree))
    return "\n\n".join(out)



