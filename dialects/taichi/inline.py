"""`@ti.func` calls inlined: the function's body rewritten once per kernel translation (rewrite.Rewriter)
and lowered in place of each call by a macro, as Taichi inlines its functions."""

from __future__ import annotations

import ast

from gradkit.core.frontend.ast_copy import copy_tree
from gradkit.core.frontend.source import SourceInfo
from gradkit.core.lang import LangFunction

from .rewrite import Rewriter
from .scope import Shared, local_names, namespace_of


class Inline:
    """A @ti.func as a macro: its body, rewritten once per kernel translation, lowered in place of the call
    with the caller's lowering (arguments by value, as Taichi passes them; fields and the random state of
    the caller visible)."""

    def __init__(self, func, obj, shared: Shared, k: int):
        self.func, self.obj = func, obj
        py = func.pyfunc
        self.name = f"__ti_call{k}_{py.__name__}"
        src = SourceInfo(py)
        fdef = src.tree
        params = [a.arg for a in fdef.args.args]
        static = {}
        if obj is not None:
            static[params[0]] = obj
            params = params[1:]
        self.params = params
        self.defaults = dict(zip(reversed(params), reversed(fdef.args.defaults)))
        self.ns = {**namespace_of(py), **static, **shared.helpers}
        rw = Rewriter(shared, self.ns, local_names(fdef, set(static)), src, f"@ti.func '{py.__name__}'")
        body = rw.body(fdef.body, set(params))
        for n in ast.walk(ast.Module(body=body[:-1] if body and isinstance(body[-1], ast.Return) else body,
                                     type_ignores=[])):
            if isinstance(n, ast.Return):
                raise src.error(n, f"@ti.func '{py.__name__}': gradkit.taichi inlines functions and supports "
                                   "`return` only as the last statement; assign a result local and return it "
                                   "at the end")
        self.body = body
        self.ns.update(shared.helpers)          # the functions this one calls, made while rewriting it
        self.uses, self.random, self.bitwise = rw.uses, rw.random, rw.bitwise
        self.src = src
        self.lang = LangFunction(self.name, "macro", macro=self.expand)
        shared.helpers[self.name] = self.lang
        self.ns[self.name] = self.lang

    def expand(self, E, *args, **kwargs):
        lw = E.lw
        if len(args) > len(self.params):
            E.fail(f"takes {len(self.params)} arguments, got {len(args)}")
        bound = dict(zip(self.params, args))
        bound.update(kwargs)
        for p in self.params:
            if p not in bound:
                if p not in self.defaults:
                    E.fail(f"missing argument '{p}'")
                bound[p] = lw.expr(copy_tree(self.defaults[p]))
        env = {k: v for k, v in lw.env.items() if k.startswith("__ti_")}
        env.update(bound)
        saved = (lw.env, lw.src, lw.static_ns, lw.maybe_undefined)
        lw.env, lw.src, lw.static_ns, lw.maybe_undefined = env, self.src, self.ns, set()
        ret = None
        try:
            body = copy_tree(self.body)
            if body and isinstance(body[-1], ast.Return):
                lw.block(body[:-1])
                ret = lw.expr(body[-1].value) if body[-1].value is not None else None
            else:
                lw.block(body)
            rng = lw.env.get("__ti_rng")
        finally:
            lw.env, lw.src, lw.static_ns, lw.maybe_undefined = saved
        if rng is not None:
            lw.env["__ti_rng"] = rng
        return ret
