"""The gradkit gradient debugger (Streamlit): `streamlit run app/main.py -- BUNDLE_OR_FOLDER`.

`gradkit debug script.py` / `gradkit open BUNDLE` start it. The sidebar picks the bundle (when given a
folder of bundles) and the view; both are mirrored in the URL (?bundle=NAME&view=SLUG).
"""

from __future__ import annotations

import os
import pathlib
import sys

import streamlit as st

from gradkit.app import (data, paths, query, view_check, view_code, view_compare, view_flow, view_graph,
                         view_launches, view_nan, view_overview)
from gradkit.app.ui import VIEWS, plain
from gradkit.viz.bundle import BundleError

RENDER = {"launches": view_launches.render, "graph": view_graph.render, "flow": view_flow.render,
          "nan": view_nan.render, "code": view_code.render, "check": view_check.render}


@st.cache_resource(max_entries=16, show_spinner="loading bundle...")
def _load(path: str, mtime: float):
    return data.open_bundle(path)


def _mtime(path: pathlib.Path) -> float:
    """The bundle's modification time (part of the cache key); 0 when it vanished (loading then says so)."""
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _try_load(path: pathlib.Path, shown_root: pathlib.Path):
    """The loaded bundle, or the message saying why it cannot be read (the overview lists it anyway)."""
    try:
        return _load(str(path), _mtime(path))
    except BundleError as exc:
        return paths.strip_folder(str(exc), shown_root)


def _target() -> pathlib.Path | None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    target = args[0] if args else os.environ.get("GRADKIT_BUNDLE")
    return pathlib.Path(target) if target else None


def _from_query(key: str, options: list[str], what: str) -> None:
    """Seed a sidebar widget from the URL the first time the session sees it; a value naming none of
    `options` is said in the page (the widget keeps its default)."""
    if key in st.session_state:
        return
    try:
        value = query.choice(key, st.query_params.get(key), options, what)
    except BundleError as exc:
        st.warning(plain(f"{exc}: showing the default instead."))
        return
    if value is not None:
        st.session_state[key] = value


def main() -> None:
    st.set_page_config(page_title="gradkit debugger", page_icon="∇", layout="wide")
    st.sidebar.title("∇ gradkit debugger")
    target = _target()
    if target is None:
        st.error("No bundle given: start the app with `gradkit open BUNDLE` or `gradkit debug script.py`.")
        return
    shown_root = pathlib.Path(os.path.abspath(target)).parent      # messages show paths relative to it
    try:
        bundles = data.find_bundles(target)
    except BundleError as exc:
        st.error(plain(paths.strip_folder(str(exc), shown_root)))
        return
    if not bundles:
        st.error(plain(f"{target.name} holds no debug bundles."))
        return
    names = [b.name for b in bundles]
    _from_query("bundle", names, "bundle of this folder")
    name = st.sidebar.selectbox("Bundle", names, key="bundle", disabled=len(names) == 1)
    path = bundles[names.index(name)]
    _from_query("view", list(VIEWS), "view")
    view = st.sidebar.radio("View", list(VIEWS), format_func=VIEWS.get, key="view")
    st.query_params.update(bundle=name, view=view)
    try:
        bundle = _load(str(path), _mtime(path))
    except BundleError as exc:
        st.error(plain(paths.strip_folder(str(exc), shown_root)))
        return
    s = data.summary(bundle)
    steps = f"{s['steps']} Python step{'s' * (s['steps'] != 1)} · " if s["steps"] else ""  # a solve, record_func
    counts = (f"{s['launches']} launches · {steps}{s['backward launches']} backward · "
              f"devices: {', '.join(s['devices']) or '—'}")
    st.sidebar.caption(plain(path.name) + "\n\n" + plain(counts))
    if s["nan"]:
        st.sidebar.error("NaN/Inf recorded")
    if view == "overview":
        st.title("Overview")
        view_overview.render_all([(p.name, _try_load(p, shown_root)) for p in bundles])
        return
    st.title(f"{VIEWS[view]} — {plain(name)}")
    partial = data.partial_backward(bundle)
    if partial:
        st.warning(plain(partial))                    # on every view, first
    if view == "compare":
        view_compare.render(bundle, name, {p.name: (lambda p=p: _try_load(p, shown_root)) for p in bundles})
        return
    RENDER[view](bundle, name)


main()
