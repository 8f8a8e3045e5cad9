"""`@gk.func_native`: a device function whose body is native code per backend (Warp's `func_native`).

    @gk.func_native({"opencl": "out[tid] = a * x[tid] + y[tid];", "cpu": LLVM_IR_BODY},
                    adj_snippets={"opencl": "adj_a += x[tid] * adj_out[tid]; ...", "cpu": ...})
    def saxpy(a: float, x: gk.array(dtype=float), y: gk.array(dtype=float), out: gk.array(dtype=float),
              tid: int): ...

The Python signature gives the types; the body is ignored. Parameters are scalars (by value) and arrays
(a pointer to the flat row-major data). A call becomes one `native` IR instruction, which no pass looks
into: it is kept, never merged, and treated as reading and writing every array it is passed.

Snippet forms (also in docs/native.md):
- "opencl": the body of an OpenCL C function; parameters by name, arrays as `__global T*`; `return v;`
  when the function returns a value. The adjoint snippet also sees `adj_<p>` for every float scalar
  parameter (a local to `+=` into), `adj_<p>` (`__global T*`) for every float array and `adj_ret`.
- "cpu": the body of an LLVM IR function (basic blocks ending in `ret`); parameters are `%<name>`,
  arrays `ptr`, float32 `float`, float64 `double`, int32 `i32`, int64 `i64`, bool `i1`. In the adjoint,
  `%adj_<p>` is a `ptr` to a float scalar's accumulator (load, fadd, store), `%adj_<p>` the adjoint
  array's data for a float array, and `%adj_ret` the adjoint of the return value.
A backend missing the snippet a launch needs raises CompileError naming the function and the backend.
"""

from __future__ import annotations

import hashlib
import inspect
from dataclasses import dataclass, field

from .errors import CompileError
from .frontend import Lowerer
from .func import Func
from .ir import Builder, Function, Param, Region
from .ops import Op

VARIANTS = ("forward", "replay", "adjoint")


@dataclass(eq=False)
class NativeSpec:
    """The snippets of one native function and its typed signature."""

    name: str
    snippets: dict
    adj_snippets: dict | None
    replay_snippets: dict | None
    params: list = field(default_factory=list)      # [(name, type)]
    ret_type: object = None

    def __repr__(self) -> str:
        # short in printed IR; the digest keeps kernel fingerprints (and cache keys) tied to the code
        text = repr((self.snippets, self.adj_snippets, self.replay_snippets, self.params, self.ret_type))
        return f"{self.name}#{hashlib.sha256(text.encode()).hexdigest()[:12]}"

    def has(self, variant: str) -> bool:
        return {"forward": True, "replay": True, "adjoint": self.adj_snippets is not None}[variant]

    def snippet(self, backend: str, variant: str) -> str:
        """The code for `backend`; the replay falls back to the forward snippet. CompileError if missing."""
        table = {"forward": self.snippets, "replay": self.replay_snippets or self.snippets,
                 "adjoint": self.adj_snippets or {}}[variant]
        if backend not in table:
            what = {"forward": "snippets", "replay": "replay_snippets", "adjoint": "adj_snippets"}[variant]
            have = ", ".join(sorted(table)) or "none"
            raise CompileError(f"@gk.func_native '{self.name}' has no {what} entry for the '{backend}' backend "
                               f"(it has: {have}); add one or launch on a device whose backend it supports")
        return table[backend]

    def float_scalars(self) -> list[int]:
        return [k for k, (_, t) in enumerate(self.params) if t.is_scalar and t.is_float]

    def float_arrays(self) -> list[int]:
        return [k for k, (_, t) in enumerate(self.params) if t.is_array and t.scalar.is_float]


class NativeFunc(Func):
    """A @gk.func whose IR is a single `native` instruction over its parameters."""

    def __init__(self, pyfunc, spec_args: tuple):
        super().__init__(pyfunc)
        self._spec_args = spec_args
        self.native = None

    def ir_function(self, building: tuple = ()):
        if self._ir is None:
            self._ir = self._build(building)
        return self._ir

    def _build(self, building: tuple) -> Function:
        low = Lowerer(self.pyfunc, "func", building + (self,))
        tree = low.src.tree
        sig = inspect.signature(self.pyfunc)
        params = []
        for arg_node, (name, p) in zip(tree.args.args, sig.parameters.items()):
            t = low.param_type(name, p.annotation, arg_node)
            if not (t.is_scalar or t.is_array):
                raise low.error(arg_node, f"@gk.func_native parameter '{name}' has type {t}; native functions "
                                          "take scalars and arrays only")
            params.append(Param(name, t))
        rets = low.return_types(sig.return_annotation, tree) or []
        if len(rets) > 1 or any(not t.is_scalar for t in rets):
            raise low.error(tree, "@gk.func_native functions return at most one scalar")
        snippets, adj, replay = self._spec_args
        self.native = NativeSpec(self.__name__, dict(snippets), None if adj is None else dict(adj),
                                 None if replay is None else dict(replay), [(p.name, p.type) for p in params],
                                 rets[0] if rets else None)
        body = Region()
        b = Builder(body, low.src.loc(tree))
        ins = b.emit(Op.NATIVE, [p.value for p in params], rets, {"native": self.native, "variant": "forward"})
        body.yields = list(ins.results)
        fn = Function(self.__name__, params, body, rets, "func", low.src.loc(tree))
        fn.attrs["source_name"] = self.__name__
        return fn


def func_native(snippets: dict, adj_snippets: dict | None = None, replay_snippets: dict | None = None):
    """`@gk.func_native(snippets, adj_snippets=None, replay_snippets=None)`: native code per backend name.
    The decorated Python function gives the signature; a backend without a snippet raises `gk.CompileError`.

    Args:
        snippets: {backend name: code}: the function body in the backend's language (`"cpu"`: an LLVM IR
            body, `"opencl"`: OpenCL C), see docs/native.md.
        adj_snippets: {backend name: code} of the adjoint (reads the output adjoints, accumulates into the
            inputs.); None: differentiating through it raises `gk.CompileError`.
        replay_snippets: {backend name: code} run instead of `snippets` in the forward replay of the
            backward pass; None: `snippets`."""
    for what, table in (("snippets", snippets), ("adj_snippets", adj_snippets), ("replay_snippets", replay_snippets)):
        if table is not None and (not isinstance(table, dict) or
                                  not all(isinstance(k, str) and isinstance(v, str) for k, v in table.items())):
            raise TypeError(f"gk.func_native: {what} must be a dict of backend name -> code string")

    def deco(pyfunc):
        return NativeFunc(pyfunc, (snippets, adj_snippets, replay_snippets))
    return deco


def native_instrs(fn: Function) -> list:
    return [ins for ins in fn.walk() if ins.op == Op.NATIVE]


def check_snippets(fn: Function, backend: str) -> None:
    """CompileError before code generation when a native call lacks the snippet `backend` needs."""
    for ins in native_instrs(fn):
        ins.attrs["native"].snippet(backend, ins.attrs["variant"])


