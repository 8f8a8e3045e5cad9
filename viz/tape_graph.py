"""`Tape.visualize`: recorded launches as boxes with one port per argument, arrays as ellipses (one node
per array object), scopes as nested clusters, and arrays without `requires_grad` drawn distinctly so a
broken gradient path is visible. With `show_gradients`, arrays are coloured by whether gradient reached them;
with `simplify_graph`, launches repeated back to back are drawn once with their count (viz/launch_folding.py)."""

from __future__ import annotations

import numpy as np

from . import flow_states as flow
from .dot import attrs, html_escape, quote, write
from .grad_history import arrived_norms
from .launch_folding import fold

GRAD_COLOR = "#cfe8ff"      # requires_grad arrays
NOGRAD_COLOR = "#ffd6d6"    # arrays gradients cannot flow through
READONLY_COLOR = "#eeeeee"


def _label(a, names: dict, array_labels) -> str:
    if array_labels and a in array_labels:
        return array_labels[a]
    if getattr(a, "label", None):
        return a.label
    return names.get(id(a), f"array{len(names)}")


def _grad_norm(a, grads=None):
    """L2 norm of a's gradient (NaN when it holds a NaN or Inf); None without one. `grads` {id: NumPy}
    overrides the array's current `.grad` (a debug capture keeps them as backward left them)."""
    g = grads.get(id(a)) if grads else None
    if g is None:
        g = getattr(a, "grad", None)
        if g is None:
            return None
        g = g._read()
    data = np.asarray(g, dtype=np.float64).reshape(-1)
    return float(np.sqrt(np.dot(data, data))) if np.isfinite(data).all() else float("nan")


def _grad_state(a, written: bool, arrived, grads=None) -> tuple[str, float | None]:
    """The array's flow state (viz/flow_states.py) and the gradient norm it is based on."""
    norm = arrived if written and arrived is not None else _grad_norm(a, grads)
    if written and arrived is None and norm == 0.0:
        norm = None                   # cleared by backward, what arrived unknown: just "consumed"
    ran = bool(getattr(a, "grad", None) is not None)
    state = flow.classify(differentiable=flow.differentiable_dtype(a.dtype.name), requires_grad=a.requires_grad,
                          ran_backward=ran, consumed=written, norm=norm)
    return state, norm


def tape_graph(tape, filename=None, array_labels=None, graph_direction: str = "LR", hide_readonly_arrays: bool = False,
               show_gradients: bool = False, simplify_graph: bool = False, grads: dict | None = None) -> str:
    records = tape.launches
    first, launch_rep, array_rep = {}, {}, {}
    if simplify_graph:
        first, launch_rep, array_rep = fold(records, [(id(r.kernel_obj), tuple(r.scope)) for r in records])
    folded_arrays: dict[int, int] = {}
    for rep in array_rep.values():
        folded_arrays[rep] = folded_arrays.get(rep, 0) + 1
    array_labels = {k: v for k, v in (array_labels or {}).items()} if array_labels else None
    names: dict[int, str] = {}
    arrays: dict[int, object] = {}
    written: set[int] = set()
    for rec in records:
        params = [n for n, _ in rec.kernel_obj.params]
        for name, a in zip(params, rec.args):
            if hasattr(a, "buffer"):
                arrays.setdefault(id(a), a)
                names.setdefault(id(a), name)
        spec_fn = rec.kernel_obj.lowered("forward")
        from ..runtime.kernel import written_params
        for k in written_params(spec_fn):
            written.add(id(_user_arg(rec, spec_fn, k)))
    lines = ["digraph tape {", f"  rankdir={graph_direction};", "  node [fontname=Helvetica, fontsize=10];",
             "  edge [fontname=Helvetica, fontsize=9];"]
    # Arrays.
    flagged = []
    arrived = arrived_norms(tape) if show_gradients else {}
    for aid, a in arrays.items():
        if (hide_readonly_arrays and aid not in written) or aid in array_rep:
            continue
        label = _label(a, names, array_labels)
        shape = "x".join(map(str, a.shape))
        text = f"{label}\n{a.dtype.name}[{shape}]"
        if aid in folded_arrays:
            text += f"\n(and {folded_arrays[aid]} more of the repeats)"
        fill = GRAD_COLOR if a.requires_grad else NOGRAD_COLOR
        style = "filled" if a.requires_grad else "filled,dashed"
        if show_gradients:
            state, norm = _grad_state(a, aid in written, arrived.get(aid), grads)
            if state in (flow.OK, flow.CONSUMED, flow.ZERO, flow.VANISHING, flow.EXPLODING, flow.NONFINITE):
                shown = "nan" if norm is not None and np.isnan(norm) else (f"{norm:.3g}" if norm is not None else "")
                text += f"\n{state}" + (f" |grad| = {shown}" if shown else "")
            if a.requires_grad:
                fill = flow.FILLS[state]
                if state in flow.ALARMS:
                    style = "filled,bold"
                    flagged.append(f"{label}: {state}")
        tooltip = "requires_grad" if a.requires_grad else "no requires_grad: gradients cannot flow through this array"
        lines.append(f"  a{aid}{attrs(label=text, shape='ellipse', style=style, fillcolor=fill, tooltip=tooltip)};")
    # Launch nodes inside nested scope clusters.
    body: list[str] = []
    open_scopes: list[str] = []
    cluster_id = 0
    repeat_open = None
    for k, rec in enumerate(records):
        if k in launch_rep:
            continue
        scope = list(rec.scope)
        common = 0
        while common < min(len(scope), len(open_scopes)) and scope[common] == open_scopes[common]:
            common += 1
        while len(open_scopes) > common:
            open_scopes.pop()
            body.append("  " * (len(open_scopes) + 1) + "}")
        while len(open_scopes) < len(scope):
            name = scope[len(open_scopes)]
            pad = "  " * (len(open_scopes) + 1)
            body.append(f"{pad}subgraph cluster_{cluster_id} {{")
            body.append(f"{pad}  label={quote(name)}; style=rounded; color=gray50;")
            cluster_id += 1
            open_scopes.append(name)
        repeat = first.get(k)
        # a repeated block of several launches in one scope is a cluster; otherwise each node shows the count
        clustered = repeat is not None and repeat.period > 1 and all(
            tuple(records[j].scope) == tuple(rec.scope) for j in range(repeat.start, repeat.start + repeat.period))
        pad = "  " * (len(open_scopes) + 1)
        if clustered and k == repeat.start:
            body.append(f"{pad}subgraph cluster_{cluster_id} {{")
            body.append(f"{pad}  label={quote(f'repeated x{repeat.count}')}; style=dashed; color=gray40;")
            cluster_id += 1
            repeat_open = repeat
        params = [n for n, _ in rec.kernel_obj.params]
        ports = "".join(f'<TD PORT="p{j}">{html_escape(p)}</TD>' for j, p in enumerate(params))
        dim = "x".join(map(str, rec.dim))
        times = f" x{repeat.count}" if repeat is not None and not clustered else ""
        html = (f'<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0"><TR><TD COLSPAN="{max(len(params), 1)}">'
                f'<B>{html_escape(rec.kernel)}</B> [{dim}]{times}</TD></TR><TR>{ports}</TR></TABLE>>')
        body.append(pad + f"l{k} [shape=plaintext, label={html}];")
        if repeat_open is not None and k == repeat_open.start + repeat_open.period - 1:
            body.append(pad + "}")
            repeat_open = None
    while open_scopes:
        open_scopes.pop()
        body.append("  " * (len(open_scopes) + 1) + "}")
    lines += body
    # Edges: inputs into the port, outputs out of the port (folded launches and arrays by their representative).
    edges: dict[str, None] = {}
    for k, rec in enumerate(records):
        n_in = len(rec.inputs)
        node = launch_rep.get(k, k)
        for j, a in enumerate(rec.args):
            if not hasattr(a, "buffer") or (hide_readonly_arrays and id(a) not in written):
                continue
            aid = array_rep.get(id(a), id(a))
            edges[f"  a{aid} -> l{node}:p{j};" if j < n_in else f"  l{node}:p{j} -> a{aid};"] = None
    lines += edges
    if flagged:
        lines.append(f"  legend [shape=note, label={quote(chr(10).join(flagged))}];")
    lines.append("}")
    dot = "\n".join(lines) + "\n"
    write(dot, filename)
    return dot


def _user_arg(rec, fn, lowered_index):
    split = fn.attrs.get("param_split", [])
    user = []
    for u, (_, n) in enumerate(split):
        user.extend([u] * n)
    return rec.args[user[lowered_index]]
