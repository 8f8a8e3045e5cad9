"""The tape graph as data, drawn as DOT: launches (boxes with one port per argument) inside nested scope
clusters, arrays (ellipses) coloured by gradient-flow state, edges from inputs to ports and from ports to
outputs. `tape.visualize` builds it from a live tape (viz/tape_graph.py) and the debugger from a bundle
(app/graph_data.py); both draw it with `to_dot`, which can also fold repeated launches, collapse scopes into
one node each and highlight what a search matched.

A Python step on the tape (a linear solve, `record_func`) is one node too, a rounded box labelled with
what it did ("cg: 37 iterations, residual 3e-09"), with edges from the arrays it reads and to those it writes.

Node names are stable: launch k is `l<k>`, Python step k `f<k>`, an array `a<key>`, a collapsed scope `s<n>`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import flow_states as flow
from .dot import attrs, html_escape, quote
from .launch_folding import fold

GRAD_COLOR = "#cfe8ff"      # requires_grad arrays
NOGRAD_COLOR = "#ffd6d6"    # arrays gradients cannot flow through
HIGHLIGHT = "#ff7f0e"       # outline of what a search matched
DIMMED = "#bbbbbb"
STEP_COLOR = "#e9e2f7"      # Python steps (a solve, record_func): not kernels


@dataclass
class ArrayInfo:
    """One array: its label, dtype name, shape and, when gradients are shown, its flow state and norm."""
    label: str
    dtype: str
    shape: tuple
    requires_grad: bool
    state: str | None = None
    norm: float | None = None


@dataclass
class LaunchInfo:
    """One recorded launch: kernel name, launch dims, parameter names, scope path, and per argument the
    key of its array (None for a scalar); the first `n_inputs` arguments are inputs."""
    kernel: str
    dim: tuple
    params: list
    scope: tuple
    args: list
    n_inputs: int
    signature: object = None        # launches with equal signatures fold (default: kernel and scope)
    node: str | None = None         # its node name (default l<k>, k its place in TapeGraph.launches)
    step: str | None = None         # a Python step's label (a solve's method, iterations, residual); None: a launch


@dataclass
class TapeGraph:
    launches: list                  # LaunchInfo, in tape order (Python steps among them, `step` set)
    arrays: dict                    # key -> ArrayInfo
    written: set = field(default_factory=set)   # keys of arrays some launch writes


def step_info(index: int, name: str, label: str, scope, reads: list, writes: list) -> LaunchInfo:
    """Python step `index` (node `f<index>`) as a graph item: `reads` and `writes` are array keys; steps of one
    name in one scope fold together as launches of one kernel do."""
    return LaunchInfo(name, (), [], tuple(scope), [*reads, *writes], len(reads), signature=("step", name, tuple(scope)),
                      node=f"f{index}", step=label)


def with_steps(launches: list, steps: list) -> list:
    """`launches` with each (position, step item) of `steps` placed before launch `position` (at the end when
    it equals their count), steps of one position kept in their order."""
    out, at = [], sorted(steps, key=lambda ps: ps[0])
    j = 0
    for k, la in enumerate(launches):
        while j < len(at) and at[j][0] <= k:
            out.append(at[j][1])
            j += 1
        out.append(la)
    out += [item for _, item in at[j:]]
    return out


def to_dot(g: TapeGraph, direction: str = "LR", hide_readonly_arrays: bool = False, show_gradients: bool = False,
           simplify_graph: bool = False, collapsed=(), highlight: str = "") -> str:
    """DOT text of `g`. `collapsed`: scope paths (tuples) drawn as one node each with their launch count;
    `highlight`: launches and arrays whose name contains it (case-insensitive) are outlined, others dimmed."""
    records = g.launches
    node = [r.node or f"l{k}" for k, r in enumerate(records)]
    first, launch_rep, array_rep = {}, {}, {}
    if simplify_graph:
        sigs = [r.signature if r.signature is not None else (r.kernel, tuple(r.scope)) for r in records]
        first, launch_rep, array_rep = fold([r.args for r in records], sigs)
    collapsed = [tuple(c) for c in collapsed]
    owner = {k: _collapsed_owner(tuple(r.scope), collapsed) for k, r in enumerate(records)}
    scope_ids = {c: f"s{n}" for n, c in enumerate(collapsed)}
    needle = highlight.strip().lower()
    inside = _inside_collapsed(g, owner)
    folded_arrays: dict = {}
    for rep in array_rep.values():
        folded_arrays[rep] = folded_arrays.get(rep, 0) + 1
    lines = ["digraph tape {", f"  rankdir={direction};", "  node [fontname=Helvetica, fontsize=10];",
             "  edge [fontname=Helvetica, fontsize=9];"]
    flagged = []
    for key, a in g.arrays.items():
        if (hide_readonly_arrays and key not in g.written) or key in array_rep or key in inside:
            continue
        text = f"{a.label}\n{a.dtype}[{'x'.join(map(str, a.shape))}]"
        if key in folded_arrays:
            text += f"\n(and {folded_arrays[key]} more of the repeats)"
        fill = GRAD_COLOR if a.requires_grad else NOGRAD_COLOR
        style = "filled" if a.requires_grad else "filled,dashed"
        if show_gradients and a.state is not None:
            if a.state in (flow.OK, flow.CONSUMED, flow.ZERO, flow.VANISHING, flow.EXPLODING, flow.NONFINITE):
                norm = a.norm
                shown = "nan" if norm is not None and np.isnan(norm) else (f"{norm:.3g}" if norm is not None else "")
                text += f"\n{a.state}" + (f" |grad| = {shown}" if shown else "")
            if a.requires_grad:
                fill = flow.FILLS[a.state]
                if a.state in flow.ALARMS:
                    style = "filled,bold"
                    flagged.append(f"{a.label}: {a.state}")
        tooltip = "requires_grad" if a.requires_grad else "no requires_grad: gradients cannot flow through this array"
        extra = _emphasis(needle, a.label)
        lines.append(f"  a{key}{attrs(label=text, shape='ellipse', style=style, fillcolor=fill, tooltip=tooltip, **extra)};")
    body: list[str] = []
    open_scopes: list[str] = []
    cluster_id = 0
    repeat_open = None
    drawn_scopes: set = set()
    # a folded block's launches in execution order (left to right): its arrays fold onto the first
    # repetition's, so data edges alone form cycles that put the block's launches in one rank, in any order
    in_order: list[str] = []
    for k, rec in enumerate(records):
        if k in launch_rep:
            continue
        scope = list(rec.scope)
        if owner[k] is not None:
            scope = list(owner[k][:-1])         # the collapsed node sits in its parent scope
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
        pad = "  " * (len(open_scopes) + 1)
        if owner[k] is not None:
            if owner[k] not in drawn_scopes:
                drawn_scopes.add(owner[k])
                hidden = sum(1 for c in inside.values() if c == owner[k])
                body.append(pad + _scope_node(owner[k], scope_ids[owner[k]], records, owner, needle, hidden))
            continue
        repeat = first.get(k)
        # a repeated block of several launches in one scope is a cluster; otherwise each node shows the count
        clustered = repeat is not None and repeat.period > 1 and all(
            tuple(records[j].scope) == tuple(rec.scope) for j in range(repeat.start, repeat.start + repeat.period))
        if clustered and k == repeat.start:
            body.append(f"{pad}subgraph cluster_{cluster_id} {{")
            body.append(f"{pad}  label={quote(f'repeated x{repeat.count}')}; style=dashed; color=gray40;")
            cluster_id += 1
            repeat_open = repeat
        times = f" x{repeat.count}" if repeat is not None and not clustered else ""
        if rec.step is not None:
            body.append(pad + _step_node(node[k], rec, times, needle))
        else:
            ports = "".join(f'<TD PORT="p{j}">{html_escape(p)}</TD>' for j, p in enumerate(rec.params))
            dim = "x".join(map(str, rec.dim))
            table, extra = _launch_emphasis(needle, rec.kernel)
            html = (f'<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0"{table}><TR><TD COLSPAN='
                    f'"{max(len(rec.params), 1)}"><B>{html_escape(rec.kernel)}</B> [{dim}]{times}</TD></TR>'
                    f'<TR>{ports}</TR></TABLE>>')
            body.append(pad + f"{node[k]} [shape=plaintext, label={html}{extra}];")
        if repeat is not None and k + 1 < repeat.start + repeat.period and owner[k + 1] is None:
            in_order.append(f"  {node[k]} -> {node[k + 1]} [style=invis, weight=10];")
        if repeat_open is not None and k == repeat_open.start + repeat_open.period - 1:
            body.append(pad + "}")
            repeat_open = None
    while open_scopes:
        open_scopes.pop()
        body.append("  " * (len(open_scopes) + 1) + "}")
    lines += body
    # Edges: inputs into the port, outputs out of the port (folded launches and arrays by their representative;
    # a collapsed scope's launches by its node).
    edges: dict[str, None] = {}
    for k, rec in enumerate(records):
        drawn_as = launch_rep.get(k, k)
        for j, key in enumerate(rec.args):
            if key is None or (hide_readonly_arrays and key not in g.written):
                continue
            drawn = array_rep.get(key, key)
            if key in inside or drawn in inside:
                continue
            a = f"a{drawn}"
            target = f"{scope_ids[owner[k]]}" if owner[k] is not None else \
                node[drawn_as] if rec.step is not None else f"{node[drawn_as]}:p{j}"
            edges[f"  {a} -> {target};" if j < rec.n_inputs else f"  {target} -> {a};"] = None
    lines += edges
    lines += in_order
    if flagged:
        lines.append(f"  legend [shape=note, label={quote(chr(10).join(flagged))}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def scopes(g: TapeGraph) -> list[tuple]:
    """Every scope path the launches run in (parents before children), for choosing what to collapse."""
    seen: dict = {}
    for r in g.launches:
        for n in range(1, len(r.scope) + 1):
            seen.setdefault(tuple(r.scope[:n]), None)
    return list(seen)


def _collapsed_owner(scope: tuple, collapsed: list) -> tuple | None:
    """The outermost collapsed scope containing `scope`, or None."""
    for n in range(1, len(scope) + 1):
        if scope[:n] in collapsed:
            return scope[:n]
    return None


def _inside_collapsed(g: TapeGraph, owner: dict) -> dict:
    """Arrays a collapsed scope both writes and alone uses (its intermediates), by key -> that scope: they are
    drawn inside its node, not beside it."""
    users: dict = {}
    for k, r in enumerate(g.launches):
        for key in r.args:
            if key is not None:
                users.setdefault(key, set()).add(owner[k])
    return {key: next(iter(o)) for key, o in users.items()
            if key in g.written and len(o) == 1 and next(iter(o)) is not None}


def _scope_node(path: tuple, name: str, records: list, owner: dict, needle: str, hidden: int = 0) -> str:
    inside = [records[k] for k, o in owner.items() if o == path]
    kernels = sorted({r.kernel for r in inside})
    shown = ", ".join(kernels[:4]) + (f", +{len(kernels) - 4} more" if len(kernels) > 4 else "")
    steps = sum(r.step is not None for r in inside)          # Python steps (a solve) are not launches
    count = f"{len(inside) - steps} launches" + (f", {steps} Python steps" if steps else "")
    label = f"{path[-1]} (collapsed)\n{count}: {shown}"
    if hidden:
        label += f"\n{hidden} intermediate arrays inside"
    extra = _emphasis(needle, " ".join(kernels) + " " + path[-1])
    return f"{name}{attrs(label=label, shape='box3d', style='filled', fillcolor='#f0f0f0', **extra)};"


def _step_node(name: str, rec: LaunchInfo, times: str, needle: str) -> str:
    """A Python step: a rounded box with its label (a solve's method, iterations and residual)."""
    extra = attrs(label=rec.step + times, shape="box", style="rounded,filled", fillcolor=STEP_COLOR,
                  tooltip="a Python step on the tape (not a kernel)", **_emphasis(needle, rec.step))
    return f"{name}{extra};"


def _emphasis(needle: str, name: str) -> dict:
    """Attributes outlining a search match (and greying the rest) when a search is active."""
    if not needle:
        return {}
    if needle in name.lower():
        return {"color": HIGHLIGHT, "penwidth": "3"}
    return {"fontcolor": DIMMED, "color": DIMMED}


def _launch_emphasis(needle: str, kernel: str) -> tuple[str, str]:
    """(TABLE attributes, node attributes) of a launch box for an active search: a match filled and outlined
    in the highlight colour, the rest greyed."""
    if not needle:
        return "", ""
    if needle in kernel.lower():
        return f' BGCOLOR="#ffe3c4" COLOR="{HIGHLIGHT}"', ""
    return f' COLOR="{DIMMED}"', f", fontcolor={quote(DIMMED)}"
