"""Which leading-index rows of each array a kernel accesses, as expressions of its scalar arguments.

`x[t, i] = ...` with `t` an int argument writes row `t` of x; `x[t - 1, i]` reads row `t - 1`. When
the leading index of every access to an array is such an expression (constants, int arguments, + - *),
a launch touches only those rows, and a later launch writing other rows cannot have changed what an
earlier launch's adjoint needs (time-indexed trajectories `x[t, i]`). Anything else (a thread or loop
index) is `None`: the whole array.
"""

from __future__ import annotations

from ..core.ir import Function, Value
from ..core.ops import Op
from ..core.passes.scalarize import user_params

Expr = tuple      # ("const", c) | ("arg", user_param_index) | (op, Expr, Expr) with op in add/sub/mul

_ARITH = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b}


def user_index(fn: Function) -> dict[int, int]:
    """Lowered parameter value id -> user-level parameter index (vector parameters are split)."""
    return {fn.params[k].value.id: u for k, u in enumerate(user_params(fn))}


def _expr(v: Value, defs: dict, users: dict[int, int]) -> Expr | None:
    if v.const_value is not None and v.type.is_int:
        return ("const", int(v.const_value))
    if v.id in users and v.type.is_scalar and v.type.is_int:
        return ("arg", users[v.id])
    ins = defs.get(v.id)
    if ins is None or ins.op != Op.PRIM:
        return None
    name = ins.attrs["name"]
    if name == "cast" and ins.args[0].type.is_int:
        return _expr(ins.args[0], defs, users)
    if name in _ARITH:
        a, b = (_expr(x, defs, users) for x in ins.args)
        return None if a is None or b is None else (name, a, b)
    return None


def leading_rows(fn: Function, ops: tuple[str, ...], params: range | None = None) -> dict[int, list]:
    """User parameter index -> one leading-index Expr (or None) per access of the given ops to that array.
    `params` limits which of fn's parameters count as the arrays (an adjoint's primal ones)."""
    cache = fn.attrs.setdefault("_leading_rows", {})
    key = (ops, None if params is None else (params.start, params.stop))
    if key in cache:
        return cache[key]
    users = user_index(fn)
    arrays = {p.value.id for k, p in enumerate(fn.params)
              if p.type.is_array and (params is None or k in params)}
    defs = {r.id: ins for ins in fn.walk() for r in ins.results}
    out: dict[int, list] = {}
    for ins in fn.walk():
        if ins.op in ops and ins.args[0].id in arrays:
            out.setdefault(users[ins.args[0].id], []).append(_expr(ins.args[1], defs, users))
    cache[key] = out
    return out


def evaluate(exprs: list, args: list) -> set[int] | None:
    """The set of rows the expressions name for these launch arguments; None when any is unknown."""
    rows = set()
    for e in exprs:
        value = _eval(e, args)
        if value is None:
            return None
        rows.add(value)
    return rows


def arg_positions(exprs: list) -> tuple[int, ...] | None:
    """The argument positions the expressions read (their rows depend on nothing else); None when an
    expression is unknown (the rows are None whatever the arguments)."""
    out: set[int] = set()
    stack = list(exprs)
    while stack:
        e = stack.pop()
        if e is None:
            return None
        if e[0] == "arg":
            out.add(e[1])
        elif e[0] != "const":
            stack.extend(e[1:])
    return tuple(sorted(out))


def _eval(e: Expr | None, args: list):
    if e is None:
        return None
    if e[0] == "const":
        return e[1]
    if e[0] == "arg":
        v = args[e[1]]
        return int(v) if isinstance(v, (int,)) or hasattr(v, "__index__") else None
    a, b = _eval(e[1], args), _eval(e[2], args)
    return None if a is None or b is None else _ARITH[e[0]](a, b)
