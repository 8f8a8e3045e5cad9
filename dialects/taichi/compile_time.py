"""Compile-time Python objects a Taichi kernel addresses, rewritten before gradkit's frontend sees them:
members of struct fields (`s[i].pos` is `s.pos[i]`) and static loops over fields (`for f in
ti.static([a, b])`, unrolled with `f` naming each field). A mixin of rewrite.Rewriter, which supplies
`static`, `body`, `error`, `ns`, `shared`, `locals` and `defined`."""

from __future__ import annotations

import ast
import copy

from .errors import unsupported
from .fields import Field
from .scope import _loc

_STATIC = object()          # marker: "not statically known"


class CompileTimeRewrites:
    """Struct members and static loops over fields (see the module docstring)."""

    def is_struct(self, node) -> bool:
        return getattr(self.static(node), "_ti_struct_field", False) is True

    def unstruct(self, node):
        """`s[i].m` (a member of a struct field's element) as `s.m[i]`, innermost first, so nested structs
        (`s[i].inner.m`) and components (`s[i].v[0]`) reach the member field; other nodes unchanged."""
        if isinstance(node, (ast.Subscript, ast.Attribute)):
            node.value = self.unstruct(node.value)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Subscript) and \
                    self.is_struct(node.value.value):
                member = _loc(ast.Attribute(value=node.value.value, attr=node.attr, ctx=ast.Load()), node)
                if self.static(member) is _STATIC:
                    raise self.error(node, f"struct field '{ast.unparse(node.value.value)}' has no member "
                                           f"'{node.attr}'")
                return _loc(ast.Subscript(value=member, slice=node.value.slice, ctx=node.ctx), node)
        return node

    def no_struct_element(self, node) -> None:
        if isinstance(node, ast.Subscript) and self.is_struct(node.value):
            loc = self.src.loc(node)
            raise unsupported(f"a whole struct field element as a kernel value ({loc.file}:{loc.line}: "
                              f"{ast.unparse(node)})", f"read and write its members ({ast.unparse(node)}.<member>)")

    def static_fields(self, node):
        """The items of `for f in ti.static([a, b])` when they include fields (a list or tuple named or
        written without calls or locals), else None (gk.static unrolls other static loops)."""
        it = node.iter
        if len(it.args) != 1 or self.loop_targets(node.target) is None or \
                any(isinstance(n, ast.Lambda) for n in ast.walk(it.args[0])) or \
                any(isinstance(n, ast.Call) and self.static(n.func) not in _PURE for n in ast.walk(it.args[0])) or \
                any(isinstance(n, (ast.Break, ast.Continue)) for st in node.body for n in ast.walk(st)):
            return None
        names = {n.id for n in ast.walk(it.args[0]) if isinstance(n, ast.Name)}
        if names & self.locals:
            return None
        try:
            items = eval(compile(ast.Expression(body=it.args[0]), "<ti.static>", "eval"), dict(self.ns))  # noqa: S307
        except Exception:
            return None
        if not isinstance(items, (list, tuple, enumerate, zip, reversed)):
            return None
        items = list(items)
        flat = [x for v in items for x in (v if isinstance(v, tuple) else (v,))]
        if not any(isinstance(v, Field) or getattr(v, "_ti_struct_field", False) for v in flat):
            return None
        return items

    @staticmethod
    def loop_targets(t):
        """The names of a static loop's target (`f`, `k, f`), or None for other targets."""
        if isinstance(t, ast.Name):
            return [t.id]
        if isinstance(t, ast.Tuple) and all(isinstance(e, ast.Name) for e in t.elts):
            return [e.id for e in t.elts]
        return None

    def unroll(self, node, items: list) -> list:
        """`for f in ti.static([a, b]): body` over fields: the body once per item, `f` replaced by a name
        bound to the item at compile time (so `f[i]` is field a's, then b's, access)."""
        targets, out = self.loop_targets(node.target), []
        for v in items:
            values = (v,) if len(targets) == 1 else tuple(v)
            if len(values) != len(targets):
                raise self.error(node.target, f"cannot unpack {v!r} into {len(targets)} loop variables")
            renames = {}
            for t, x in zip(targets, values):
                renames[t] = name = f"__ti_static{len(self.shared.helpers)}"
                self.shared.helpers[name] = x
                self.ns[name] = x
            body = [_Rename(renames).visit(copy.deepcopy(st)) for st in node.body]
            out += self.body(body, self.defined)
        return out or [_loc(ast.Pass(), node)]


_PURE = (enumerate, zip, list, tuple, reversed, range, len)     # calls a static loop's items may use


class _Rename(ast.NodeTransformer):
    """Loads of the names in `renames` as their new names (an unrolled static loop's variables)."""

    def __init__(self, renames: dict):
        self.renames = renames

    def visit_Name(self, node):
        new = self.renames.get(node.id)
        if new is not None and isinstance(node.ctx, ast.Load):
            return _loc(ast.Name(id=new, ctx=ast.Load()), node)
        return node
