"""`Tape.visualize`: recorded launches as boxes with one port per argument, arrays as ellipses (one node
per array object), scopes as nested clusters, and arrays without `requires_grad` drawn distinctly so a
broken gradient path is visible. With `show_gradients`, arrays are coloured by whether gradient reached them;
with `simplify_graph`, launches repeated back to back are drawn once with their count (viz/launch_folding.py)."""

from __future__ import annotations

import numpy as np

from . import flow_states as flow
from .dot import DotSource, write
from .grad_history import arrived_norms
from .bundle_steps import step_entries, step_label, step_name
from .graph_model import ArrayInfo, LaunchInfo, TapeGraph, step_info, to_dot, with_steps


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


VISUALIZE_FOLD_OVER = 50     # tape.visualize() folds repeated launches past this many launches


def tape_graph(tape, filename=None, array_labels=None, graph_direction: str = "LR", hide_readonly_arrays: bool = False,
               show_gradients: bool = False, simplify_graph: bool | None = False, grads: dict | None = None
               ) -> DotSource:
    """DOT text of the tape's launches (viz/graph_model.py), written or rendered to `filename` when given;
    what `tape.visualize` returns.

    Args:
        tape: a `gk.Tape` that recorded launches.
        filename: also write it there: `.dot`/`.gv` as text, `.svg`/`.png`/`.pdf` rendered by GraphViz's `dot`.
        array_labels: {array: name} for arrays without a `label`.
        graph_direction: GraphViz's rankdir: "LR" or "TB".
        hide_readonly_arrays: leave out arrays no launch writes.
        show_gradients: label each array with the magnitude of its gradient.
        simplify_graph: draw launches repeated back to back once, with their count; None: fold past
            VISUALIZE_FOLD_OVER launches.
        grads: {id(array): NumPy gradient} to show instead of the arrays' current `.grad` (a debug
            bundle's saved gradients)."""
    if simplify_graph is None:
        simplify_graph = len(tape.launches) > VISUALIZE_FOLD_OVER
    dot = to_dot(tape_model(tape, array_labels, show_gradients, grads), graph_direction,
                 hide_readonly_arrays=hide_readonly_arrays, show_gradients=show_gradients,
                 simplify_graph=simplify_graph)
    write(dot, filename)
    return DotSource(dot)


def tape_model(tape, array_labels=None, show_gradients: bool = False, grads: dict | None = None) -> TapeGraph:
    """The graph of a live tape: arrays keyed by id(), their flow states when `show_gradients`."""
    from ..backends.analysis import written_params
    records = tape.launches
    names: dict[int, str] = {}
    arrays: dict[int, object] = {}
    written: set[int] = set()
    launches = []
    for rec in records:
        params = [n for n, _ in rec.kernel_obj.params]
        for name, a in zip(params, rec.args):
            if hasattr(a, "buffer"):
                arrays.setdefault(id(a), a)
                names.setdefault(id(a), name)
        spec_fn = rec.kernel_obj.lowered("forward")
        for k in written_params(spec_fn):
            written.add(id(_user_arg(rec, spec_fn, k)))
        launches.append(LaunchInfo(rec.kernel, tuple(rec.dim), params, tuple(rec.scope),
                                   [id(a) if hasattr(a, "buffer") else None for a in rec.args], len(rec.inputs),
                                   signature=(id(rec.kernel_obj), tuple(rec.scope)), node=f"l{len(launches)}"))
    steps, step_arrays, step_names = [], {}, {}
    for st in step_entries(tape, step_arrays, step_names):       # a solve, record_func: one node each
        key = {aid: id(a) for aid, a in step_arrays.items()}
        steps.append((st["position"], step_info(st["index"], step_name(st), step_label(st), st["scope"],
                                                [key[a] for a in st["reads"]], [key[a] for a in st["writes"]])))
        written.update(key[a] for a in st["writes"])
    for aid, a in step_arrays.items():
        arrays.setdefault(id(a), a)
        names.setdefault(id(a), step_names[aid])
    launches = with_steps(launches, steps)
    arrived = arrived_norms(tape) if show_gradients else {}
    infos = {}
    for aid, a in arrays.items():
        info = ArrayInfo(_label(a, names, array_labels), a.dtype.name, tuple(a.shape), a.requires_grad)
        if show_gradients:
            info.state, info.norm = _grad_state(a, aid in written, arrived.get(aid), grads)
        infos[aid] = info
    return TapeGraph(launches, infos, written)


def _user_arg(rec, fn, lowered_index):
    split = fn.attrs.get("param_split", [])
    user = []
    for u, (_, n) in enumerate(split):
        user.extend([u] * n)
    return rec.args[user[lowered_index]]
