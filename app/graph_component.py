"""The tape graph as an interactive picture: GraphViz renders the DOT to SVG on the server, and a small page
(in an iframe) lets the user zoom (wheel, +/- buttons), pan (drag), fit, and click a node to read its facts.

It opens at a readable scale: the whole graph when it fits with text at least READABLE_SCALE of its size,
else at that scale centred on the first search match, or on the loss (from the top left without one), to be
panned. Text from the bundle reaches the page only through GraphViz's escaped SVG (the DOT quotes and escapes
it: viz/dot.py) and JSON with '<', '>' and '&' escaped, which the page writes with textContent."""

from __future__ import annotations

import json
import os
import re

from ..viz.dot import RenderError, render

READABLE_SCALE = 0.9        # 10-pt labels stay >= 9 px on screen
RENDER_TIMEOUT = 15.0       # seconds the page waits for `dot` before offering the folded or static view
HEIGHT = 700                # iframe height in CSS pixels
# Launch boxes (HTML tables with a port per argument) past which `dot` is not started: their crossings make
# the layout blow up (the 50-step rope unfolded: 49 boxes 0.14 s, 65 1.4 s, 81 4 s, 97 7 s, 201 over 60 s).
# GRADKIT_GRAPH_MAX_LAUNCHES raises it for a user who would rather wait.
MAX_LAUNCH_BOXES = 64
_LAUNCH_BOX = re.compile(r"^\s*l\d+ \[shape=plaintext", re.M)
# In a tag of the SVG: an element or attribute that runs code or loads something. Text between tags is
# escaped by GraphViz (a label reading "javascript:" is just text), so only tags are searched.
_TAG = re.compile(r"<[^>]*>")
_ACTIVE = re.compile(r"^<\s*(?:script|foreignObject|image|iframe|use)\b|\s(?:on\w+|href|xlink:href|src)\s*="
                     r"|javascript:", re.I)


class NoRenderer(RuntimeError):
    """GraphViz's `dot` did not render the graph (`kind` as RenderError's; "unsafe" for active SVG content):
    the caller says why and falls back to st.graphviz_chart, or, for a graph too large or slow to lay out,
    to the folded view."""

    def __init__(self, message: str, kind: str = "failed"):
        super().__init__(message)
        self.kind = kind


def session_gone() -> bool:
    """Whether the Streamlit session running this script has ended (its browser tab closed: the runtime
    dropped it from the active sessions); False outside a Streamlit script run."""
    try:
        from streamlit.runtime import get_instance
        from streamlit.runtime.scriptrunner import get_script_run_ctx
        ctx = get_script_run_ctx(suppress_warning=True)
        return ctx is not None and not get_instance().is_active_session(ctx.session_id)
    except Exception:                       # no runtime (a bare import, a test): nothing to cancel
        return False


def max_launch_boxes() -> int:
    """MAX_LAUNCH_BOXES, or the GRADKIT_GRAPH_MAX_LAUNCHES environment variable when it holds a number."""
    value = os.environ.get("GRADKIT_GRAPH_MAX_LAUNCHES", "")
    return int(value) if value.isdecimal() else MAX_LAUNCH_BOXES


def render_svg(dot: str) -> str:
    """SVG text of `dot` from GraphViz's `dot` program (viz/dot.py `render`: killed past its time or when the
    tab that asked for it closes, never started on a graph too large to lay out quickly); NoRenderer saying
    why it did not render."""
    boxes = len(_LAUNCH_BOX.findall(dot))
    limit = max_launch_boxes()
    if boxes > limit:
        raise NoRenderer(f"{boxes} launch boxes are more than dot lays out in about 2 s (limit {limit}, "
                         "GRADKIT_GRAPH_MAX_LAUNCHES): fold repeated launches or collapse scopes", "too_large")
    try:
        svg = render(dot, "svg", timeout=RENDER_TIMEOUT, cancelled=session_gone).decode("utf-8")
    except RenderError as exc:
        raise NoRenderer(str(exc), exc.kind) from None
    svg = svg[svg.find("<svg"):]                       # drop the XML prolog and doctype
    if any(_ACTIVE.search(tag.group()) for tag in _TAG.finditer(svg)):  # GraphViz escapes labels; be sure
        raise NoRenderer("the rendered SVG holds active content", "unsafe")
    return svg


def _json(value) -> str:
    """JSON safe inside a <script> element."""
    return (json.dumps(value).replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def page(svg: str, facts: dict, focus: list[str] | None = None, height: int = HEIGHT, home: str | None = None) -> str:
    """The iframe's HTML: toolbar, the SVG in a pannable viewport, and the facts panel of the clicked node."""
    values = {"HEIGHT": str(height - 48), "SVG": svg, "FACTS": _json(facts), "FOCUS": _json(focus or []),
              "HOME": _json(home),
              "READABLE": str(READABLE_SCALE)}
    # one pass, so a placeholder-like text inside one value is never substituted again
    return re.sub(r"%([A-Z]+)%", lambda m: values.get(m.group(1), m.group(0)), PAGE)


PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><style>
body { margin: 0; font: 13px Helvetica, Arial, sans-serif; }
#bar { display: flex; gap: 6px; align-items: center; padding: 4px 0 6px; }
#bar button { font-size: 13px; padding: 2px 10px; }
#wrap { display: flex; gap: 8px; }
#view { flex: 1; height: %HEIGHT%px; border: 1px solid #ccc; overflow: hidden; cursor: grab; position: relative; }
#view.dragging { cursor: grabbing; }
#view svg { display: block; width: 100%; height: 100%; }
#facts { width: 340px; height: %HEIGHT%px; overflow: auto; border: 1px solid #ccc; padding: 8px; box-sizing: border-box;
         font-size: 14px; line-height: 1.45; }
#facts table { border-collapse: collapse; width: 100%; }
#facts td { border-bottom: 1px solid #eee; padding: 3px 4px; vertical-align: top; overflow-wrap: anywhere; }
#facts td:first-child { color: #555; white-space: nowrap; }
g.node { cursor: pointer; }
g.node.gk-selected polygon, g.node.gk-selected ellipse { stroke: #ff7f0e; stroke-width: 3; }
</style></head><body>
<div id="bar">
  <button id="zoom-in" title="zoom in">+</button><button id="zoom-out" title="zoom out">&minus;</button>
  <button id="fit" title="show the whole graph">fit</button><button id="actual" title="100 %">1:1</button>
  <span id="scale"></span><span style="color:#666">wheel: zoom · drag: pan · click a node: its facts</span>
</div>
<div id="wrap"><div id="view">%SVG%</div><div id="facts"><i>Click a launch or an array.</i></div></div>
<script>
(function () {
  const FACTS = %FACTS%, FOCUS = %FOCUS%, HOME = %HOME%, READABLE = %READABLE%;
  const view = document.getElementById("view"), svg = view.querySelector("svg");
  const box = svg.viewBox.baseVal, full = {x: box.x, y: box.y, w: box.width, h: box.height};
  svg.removeAttribute("width"); svg.removeAttribute("height");
  svg.setAttribute("preserveAspectRatio", "xMinYMin meet");
  let vb = {x: full.x, y: full.y, w: full.w, h: full.h};
  function size() { return {w: view.clientWidth, h: view.clientHeight}; }
  function scale() { return size().w / vb.w; }
  function apply() {
    svg.setAttribute("viewBox", [vb.x, vb.y, vb.w, vb.h].join(" "));
    document.getElementById("scale").textContent = Math.round(scale() * 100) + " %";
    view.dataset.scale = scale().toFixed(4);
  }
  function setScale(s, cx, cy) {          // cx, cy: the graph point kept under the same screen point
    const v = size(), fx = (cx - vb.x) / vb.w, fy = (cy - vb.y) / vb.h;
    vb.w = v.w / s; vb.h = v.h / s; vb.x = cx - fx * vb.w; vb.y = cy - fy * vb.h; apply();
  }
  function fit() {
    const v = size(), s = Math.min(v.w / full.w, v.h / full.h);
    vb = {x: full.x, y: full.y, w: v.w / s, h: v.h / s}; apply();
  }
  function centre(name) {
    const node = [...svg.querySelectorAll("g.node")].find(g => g.querySelector("title").textContent === name);
    if (!node) return false;
    const r = node.getBoundingClientRect(), o = view.getBoundingClientRect(), k = scale();
    const cx = vb.x + (r.left + r.width / 2 - o.left) / k, cy = vb.y + (r.top + r.height / 2 - o.top) / k;
    const v = size(), s = Math.max(k, READABLE);
    vb.w = v.w / s; vb.h = v.h / s; vb.x = cx - vb.w / 2; vb.y = cy - vb.h / 2;
    // keep the view inside the graph: a node at its edge (the loss, drawn last) is shown with the graph
    // beside it, not half a view of blank space
    if (vb.w < full.w) vb.x = Math.min(Math.max(vb.x, full.x), full.x + full.w - vb.w);
    if (vb.h < full.h) vb.y = Math.min(Math.max(vb.y, full.y), full.y + full.h - vb.h);
    apply(); select(node); return true;
  }
  function initial() {
    const v = size(), s = Math.min(v.w / full.w, v.h / full.h);
    if (s >= READABLE) { fit(); } else { vb = {x: full.x, y: full.y, w: v.w / READABLE, h: v.h / READABLE}; apply(); }
    for (const name of FOCUS) { if (centre(name)) return; }
    if (HOME && s < READABLE) centre(HOME);    // a graph too big to fit readably opens on the loss
  }
  function graphPoint(ev) {
    const r = view.getBoundingClientRect(), s = scale();
    return {x: vb.x + (ev.clientX - r.left) / s, y: vb.y + (ev.clientY - r.top) / s};
  }
  view.addEventListener("wheel", ev => {
    ev.preventDefault();
    const p = graphPoint(ev);
    setScale(Math.min(8, Math.max(0.02, scale() * Math.exp(-ev.deltaY * 0.0015))), p.x, p.y);
  }, {passive: false});
  let drag = null;
  view.addEventListener("pointerdown", ev => { drag = {x: ev.clientX, y: ev.clientY, vx: vb.x, vy: vb.y, moved: false}; });
  window.addEventListener("pointermove", ev => {
    if (!drag) return;
    const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) { drag.moved = true; view.classList.add("dragging"); }
    if (drag.moved) { vb.x = drag.vx - dx / scale(); vb.y = drag.vy - dy / scale(); apply(); }
  });
  window.addEventListener("pointerup", ev => {
    const was = drag; drag = null; view.classList.remove("dragging");
    if (!was || was.moved) return;
    const node = ev.target.closest && ev.target.closest("g.node");
    if (node) select(node);
  });
  function select(node) {
    svg.querySelectorAll("g.gk-selected").forEach(g => g.classList.remove("gk-selected"));
    node.classList.add("gk-selected");
    const name = node.querySelector("title").textContent, rows = FACTS[name];
    const panel = document.getElementById("facts");
    panel.textContent = "";
    const table = document.createElement("table");
    for (const [k, v] of (rows || [["node", name], ["facts", "none recorded"]])) {
      const tr = table.insertRow(); tr.insertCell().textContent = k; tr.insertCell().textContent = v;
    }
    panel.appendChild(table); panel.dataset.node = name;
  }
  document.getElementById("zoom-in").onclick = () => setScale(scale() * 1.25, vb.x + vb.w / 2, vb.y + vb.h / 2);
  document.getElementById("zoom-out").onclick = () => setScale(scale() / 1.25, vb.x + vb.w / 2, vb.y + vb.h / 2);
  document.getElementById("fit").onclick = fit;
  document.getElementById("actual").onclick = () => setScale(1, vb.x + vb.w / 2, vb.y + vb.h / 2);
  window.addEventListener("resize", apply);
  initial();
})();
</script></body></html>
"""
