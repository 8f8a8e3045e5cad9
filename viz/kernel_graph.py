"""`gk.viz.kernel_graph`: a kernel's (lowered) IR as a data-flow graph; nodes show op, type and source line,
structured regions (if / for / while) are clusters."""

from __future__ import annotations

import itertools

from ..core.ops import Op
from .dot import attrs, quote, write


def kernel_graph(kernel, adjoint: bool = False, filename=None) -> str:
    """DOT text of a kernel's lowered IR as data flow: one node per instruction (loads, stores, builtins,
    control-flow regions), edges from each value to its uses.

    Args:
        kernel: a `@gk.kernel`.
        adjoint: draw the adjoint kernel that `tape.backward` launches instead of the forward one.
        filename: also write it there: `.dot` as text, `.svg`/`.png`/`.pdf` rendered by GraphViz's `dot`."""
    fn = kernel.lowered("adjoint" if adjoint else "forward")
    ids = itertools.count()
    lines = [f"digraph {quote(fn.name)} {{", "  rankdir=TB;", "  node [fontname=Helvetica, fontsize=9];"]
    producer: dict[int, str] = {}
    for p in fn.params:
        node = f"n{next(ids)}"
        producer[p.value.id] = node
        lines.append(f"  {node}{attrs(label=f'{p.name}: {p.type.name}', shape='invhouse', style='filled', fillcolor='#e8f4e8')};")
    edges: list[str] = []

    def region(r, depth):
        pad = "  " * depth
        for prm in r.params:
            node = f"n{next(ids)}"
            producer[prm.id] = node
            lines.append(f"{pad}{node}{attrs(label=f'param {prm.type.name}', shape='circle')};")
        for ins in r.body:
            node = f"n{next(ids)}"
            line = f" @{ins.loc.line}" if ins.loc is not None else ""
            rtype = ", ".join(x.type.name for x in ins.results)
            label = f"{ins.name}" + (f" {ins.attrs['value']!r}" if ins.op == Op.CONST else "") + \
                    (f"\n{rtype}" if rtype else "") + line
            shape = {"load": "box", "store": "box", "atomic": "box", "const": "plaintext"}.get(ins.op, "ellipse")
            lines.append(f"{pad}{node}{attrs(label=label, shape=shape)};")
            for a in ins.args:
                if a.id in producer:
                    edges.append(f"  {producer[a.id]} -> {node};")
            for x in ins.results:
                producer[x.id] = node
            for k, sub in enumerate(ins.regions):
                cid = next(ids)
                lines.append(f"{pad}subgraph cluster_{cid} {{")
                lines.append(f"{pad}  label={quote(f'{ins.op} region {k}')}; style=dashed;")
                region(sub, depth + 1)
                lines.append(f"{pad}}}")

    region(fn.body, 1)
    lines += edges
    lines.append("}")
    dot = "\n".join(lines) + "\n"
    write(dot, filename)
    return dot
