"""The debugger's tape graph, built from a bundle: the same model `tape.visualize` draws (viz/graph_model.py),
with arrays coloured by the flow view's states (flow_data.gradient_flow), so the graph and the flow table never
disagree; plus, per node, the facts shown when it is clicked. No Streamlit here."""

from __future__ import annotations

from ..viz.bundle import FOLD_OVER, Bundle
from ..viz.bundle_steps import step_label, step_name
from ..viz.graph_model import ArrayInfo, LaunchInfo, TapeGraph, scopes, step_info, to_dot, with_steps
from . import data, flow_data, nan_data


def bundle_model(bundle: Bundle, gradients: bool = True) -> TapeGraph:
    """Launches and arrays of the bundle; arrays keyed by their bundle id without the leading 'a'."""
    flow = {r["id"]: r for r in flow_data.gradient_flow(bundle)} if gradients else {}
    arrays = {}
    for a in bundle.manifest["arrays"]:
        row = flow.get(a["id"])
        arrays[_key(a["id"])] = ArrayInfo(a["label"], a["dtype"], tuple(a["shape"]), a["requires_grad"],
                                          state=row["flag"] if row else None,
                                          norm=row["grad norm"] if row else None)
    launches, written = [], set()
    bad = _nonfinite_launches(bundle)
    for la in bundle.launches:
        keys = [_key(a) if a is not None else None for a in la["arrays"]]
        # a launch that made a NaN/Inf gets a signature of its own: folding never hides it among its repeats
        sig = (la["kernel"], tuple(la["scope"]), "non-finite", la["index"]) if la["index"] in bad else None
        launches.append(LaunchInfo(la["kernel"], tuple(la["dim"]), list(la["params"]), tuple(la["scope"]), keys,
                                   la.get("n_inputs", len(keys)), signature=sig, node=f"l{la['index']}"))
        written.update(keys[j] for j in flow_data.written_params(la) if keys[j] is not None)
    steps = []
    for st in bundle.steps:
        item = step_info(st["index"], step_name(st), step_label(st), st["scope"], [_key(a) for a in st["reads"]],
                         [_key(a) for a in st["writes"]])
        steps.append((st["position"], item))
        written.update(_key(a) for a in st["writes"])
    return TapeGraph(with_steps(launches, steps), arrays, written)


def _nonfinite_launches(bundle: Bundle) -> set[int]:
    """Forward launches where a NaN/Inf appeared: the recorded origin's, and any whose snapshots gained one."""
    out = {r["index"] for r in data.launch_rows(bundle) if r["pass"] == "forward" and r["new non-finite"]}
    origin = nan_data.nan_origin(bundle)
    if origin is not None and origin.get("launch") is not None:
        out.add(origin["launch"])
    return out


def loss_node(bundle: Bundle) -> str | None:
    """The graph node of the loss, where the view opens when nothing is searched: the one-element array
    the last launch writing one wrote (what backward seeds), as `a<key>`; None when there is none."""
    sizes = {a["id"]: a["shape"] for a in bundle.manifest["arrays"]}
    for la in reversed(bundle.launches):
        for j in flow_data.written_params(la):
            aid = la["arrays"][j]
            if aid is not None and all(d == 1 for d in sizes.get(aid, [0])):
                return f"a{_key(aid)}"
    return None


def graph_dot(bundle: Bundle, gradients: bool = True, collapsed=(), search: str = "",
              simplify: bool | None = None) -> str:
    """DOT of the bundle's tape graph: repeats folded past FOLD_OVER launches (or as `simplify` says),
    `collapsed` scope paths drawn as one node each, names containing `search` outlined."""
    fold = len(bundle.launches) > FOLD_OVER if simplify is None else simplify
    return to_dot(bundle_model(bundle, gradients), show_gradients=gradients, simplify_graph=fold,
                  collapsed=collapsed, highlight=search)


def scope_paths(bundle: Bundle) -> list[tuple]:
    return scopes(bundle_model(bundle, gradients=False))


def matches(bundle: Bundle, search: str) -> list[dict]:
    """Launches, Python steps and arrays whose kernel or label contains `search` (case-insensitive)."""
    needle = search.strip().lower()
    if not needle:
        return []
    out = [{"kind": "launch", "name": la["kernel"], "index": la["index"], "scope": " / ".join(la["scope"])}
           for la in bundle.launches if needle in la["kernel"].lower()]
    out += [{"kind": "step", "name": step_label(st), "index": st["index"], "scope": " / ".join(st["scope"])}
            for st in bundle.steps if needle in step_label(st).lower()]
    out += [{"kind": "array", "name": a["label"], "index": None, "scope": ""}
            for a in bundle.manifest["arrays"] if needle in a["label"].lower()]
    return out


def node_facts(bundle: Bundle) -> dict[str, list[tuple[str, str]]]:
    """For every graph node name (`l<k>`, `f<k>`, `a<key>`), the (field, value) lines shown when it is clicked:
    a launch's kernel, dims, scope, time, call site and arguments; a Python step's label (a solve's
    iterations and residual), place among the launches, arrays and facts; an array's dtype, shape, requires_grad,
    flow state, gradient norm and value range."""
    facts: dict[str, list] = {}
    runs: dict[str, int] = {}
    for la in bundle.launches:
        runs[la["kernel"]] = runs.get(la["kernel"], 0) + 1
    for la in bundle.launches:
        args = [f"{p}={data.label(bundle, a)}" if a is not None else f"{p}={data.fmt(s)}"
                for p, a, s in zip(la["params"], la["arrays"], la["scalars"])]
        site = la.get("site")
        facts[f"l{la['index']}"] = [
            ("launch", f"#{la['index']} {la['kernel']}"), ("dim", "x".join(map(str, la["dim"]))),
            ("device", la["device"]), ("scope", " / ".join(la["scope"]) or "(none)"),
            ("time", f"{la['ms']:.3f} ms" if la.get("ms") is not None else "n/a"),
            ("launches of this kernel", str(runs[la["kernel"]])),
            ("called at", f"{data.shown_path(bundle, site['file'])}:{site['line']}" if site else "n/a"),
            ("arguments", ", ".join(args))]
    for row in data.step_rows(bundle):
        facts[f"f{row['step']}"] = [
            ("Python step", f"#{row['step']} {row['step label']}"), ("recorded as", row["name"]),
            ("kind", row["kind"] + " (not a kernel: its backward is Python code)"), ("ran", row["when"]),
            ("scope", row["scope"] or "(none)"), ("reads", row["reads"] or "(none)"),
            ("writes", row["writes"] or "(none)"), ("facts", row["facts"] or "(none)")]
    for row in flow_data.gradient_flow(bundle):
        a = data.array_meta(bundle)[row["id"]]
        lines = [("array", a["label"])]
        if a.get("param") and a["param"] != a["label"]:
            lines.append(("bound to parameter", a["param"]))
        if a.get("created"):
            lines.append(("created at", f"{data.shown_path(bundle, a['created']['file'])}:{a['created']['line']}"))
        lines += [("type", f"{a['dtype']}[{'x'.join(map(str, a['shape']))}]"),
                 ("requires_grad", str(a["requires_grad"])), ("gradient flow", row["flag"]),
                 ("grad norm", data.fmt(row["grad norm"])), ("non-finite grad entries", str(row["non-finite"]))]
        value = bundle.value(row["id"])
        if value is not None and value.size and value.dtype.kind == "f":
            lines.append(("value range", f"{data.fmt(float(value.min()))} .. {data.fmt(float(value.max()))}"))
        lines.append(("explanation", flow_data.flow_explanation(row["flag"])))
        facts[f"a{_key(row['id'])}"] = lines
    return facts


def _key(aid: str) -> str:
    return aid[1:] if aid.startswith("a") else aid
