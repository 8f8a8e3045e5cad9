"""Issue 41's acceptance test in Chromium: the generated 201-launch, 50-step rope (tests/app/planted.py)
with four planted bugs. From the landing page each bug is one click away (a link on the program's line),
and the page it opens names the line the generator planted it on. Every view answers within 3 s on that
program: the time from navigation until the view's main element is visible, best of two visits. On a
machine whose run queue is longer than its cores (the shared 2-core test machine runs at a load of 8-10)
the 3 s are scaled by load / cores, at most 3x; the timings, the load and the budget used go to
test-artifacts/app/planted-timings.json.

Screenshots of each view go to test-artifacts/app/planted-<view>.png (the closing note's copies live in
docs/screenshots/debugger/).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time

import pytest

from tests.app import planted as program
from tests.app import test_browser as tb
from tests.app.test_browser import ARTIFACTS, CHROMIUM, TIMEOUT, _serve, _settled, expect, shoot

browser, page = tb.browser, tb.page         # test_browser.py's Chromium fixtures, shared

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium found (apt-get install chromium, "
                                "as `make test` does as root; or set GRADKIT_CHROMIUM)")

ANSWER_S = 3.0        # issue 41: every page of the debugger answers within this on the planted program


def _load_factor() -> float:
    """The 1-minute load average per core, between 1 (an idle or just busy machine) and 3."""
    return min(max(os.getloadavg()[0] / (os.cpu_count() or 1), 1.0), 3.0)


@pytest.fixture(scope="module")
def planted_server(planted, tmp_path_factory):
    folder, _ = planted
    yield from _serve(folder, tmp_path_factory.mktemp("streamlit-planted"))


def _row(page):
    """The landing page's row of the planted program."""
    return page.locator(".gk-bundle-row", has=page.get_by_role("link", name="planted", exact=True))


def _landing(page, server):
    page.goto(server)
    expect(page.locator("h1", has_text="Overview")).to_be_visible()
    _settled(page)
    return _row(page)


def _hazard_alert(page, kind: str):
    return page.locator('[data-testid="stAlert"]', has_text=f"Hazard ({kind})")


@pytest.mark.parametrize("bug", program.BUGS)
def test_each_planted_bug_is_one_click_from_the_landing_page_with_its_line(page, planted, planted_server, bug):
    _, lines = planted
    at = f"planted.py:{lines[bug]}"
    row = _landing(page, planted_server)
    clicks = 0
    if bug == "nan":
        row.locator("a.gk-link", has_text="NaN/Inf: sqrt").click()
        clicks += 1
        expect(page.locator("h1", has_text="NaN/Inf origin — planted")).to_be_visible()
        _settled(page)
        expect(page.locator(".gk-nan-op")).to_contain_text("sqrt(0.0) = 0.0")
        expect(page.locator(".gk-nan-fact").filter(has_text="line")).to_contain_text(at)
        expect(page.get_by_text(f"step {program.NAN_STEP} (of the {program.STEPS} recorded").first).to_be_visible()
    else:
        kind, link = {"dead_write": ("overwritten before read", f"overwritten at {at}"),
                      "host_copy": ("host copy", f"host copy: 'stiffness' at {at}"),
                      "int_cast": ("not differentiable", f"not differentiable: 'drag' at {at}")}[bug]
        row.locator("a.gk-link", has_text=link).click()
        clicks += 1
        expect(page.locator("h1", has_text="Gradient flow — planted")).to_be_visible()
        _settled(page)
        alert = _hazard_alert(page, kind)
        expect(alert).to_be_visible()
        # plain() puts an invisible WORD JOINER after a ':' that opens an emoji-like ':28:' (app/ui.py)
        expect(alert).to_contain_text(re.compile(re.escape(at).replace(":", ":\u2060?")))
        if bug == "int_cast":
            expect(alert).to_contain_text("int()")
        if bug == "host_copy":
            expect(alert).to_contain_text("'k_dev'")
    assert clicks <= 2
    shoot(page, f"planted-found-{bug}")


# view -> (a locator of its main element on the planted program, the URL's extra query)
def _main_element(page, view: str):
    if view == "overview":
        return _row(page)
    if view == "graph":
        return page.frame_locator('iframe[title="st.iframe"]').locator("#view svg")
    return {"launches": page.locator('[data-testid="stDataFrame"]').first,
            "flow": _hazard_alert(page, "host copy"),
            "nan": page.locator(".gk-nan-op"),
            "code": page.locator('[data-testid="stCode"]').first,
            "check": page.locator('[data-testid="stCode"]').first,
            "compare": page.locator('[data-testid="stMarkdownContainer"]', has_text="Changed:")}[view]


VIEWS = ("overview", "launches", "graph", "flow", "nan", "code", "check", "compare")


def test_every_view_answers_within_3_s_on_the_planted_program(page, planted_server):
    """Each view opened by URL, twice; the time until its main element is visible. The bundle is loaded
    once by the first visit (Streamlit caches it per server), which is timed too and reported."""
    timings: dict[str, list[float]] = {}
    loads = [_load_factor()]
    for attempt in range(2):
        for view in VIEWS:
            query = "" if view == "overview" else f"?bundle=planted&view={view}" + \
                ("&other=planted_fixed" if view == "compare" else "")
            start = time.perf_counter()
            page.goto(planted_server + "/" + query)
            expect(_main_element(page, view)).to_be_visible()
            timings.setdefault(view, []).append(round(time.perf_counter() - start, 3))
            _settled(page)
            if attempt == 1:
                page.wait_for_timeout(500)             # let charts and grids paint for the screenshot
                shoot(page, f"planted-{view}")
        loads.append(_load_factor())
    budget = ANSWER_S * min(loads)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "planted-timings.json").write_text(json.dumps(
        {"seconds": timings, "load per core": [round(x, 2) for x in loads], "budget s": budget}, indent=1))
    print(f"seconds until the main element is visible (first, second visit), load per core {loads}, "
          f"budget {budget:.1f} s:", timings)
    slow = {v: t for v, t in timings.items() if min(t) > budget}
    assert not slow, f"views slower than {budget:.1f} s on the planted program: {slow}"


def _dot_processes_serving(folder) -> list[int]:
    """Pids of `dot` processes whose parent's command line names `folder` (the Streamlit server on it)."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() != "dot":
                    continue
            with open(f"/proc/{pid}/stat") as f:
                parent = f.read().rsplit(")", 1)[1].split()[1]
            with open(f"/proc/{parent}/cmdline", "rb") as f:
                if str(folder).encode() in f.read():
                    out.append(int(pid))
        except OSError:
            continue
    return out


def _wait_for(predicate, seconds: float, what: str) -> float:
    """Poll `predicate` every 50 ms; the seconds it took (pytest.fail after `seconds`)."""
    start = time.perf_counter()
    while not predicate():
        if time.perf_counter() - start > seconds:
            pytest.fail(f"{what} within {seconds} s")
        time.sleep(0.05)
    return time.perf_counter() - start


def test_closing_the_tab_mid_render_stops_dot(browser, planted, tmp_path):
    """The planted program's graph unfolded (201 launch boxes: more than dot lays out in a minute) on a server
    told to try anyway (GRADKIT_GRAPH_MAX_LAUNCHES): `dot` starts; closing the tab stops it within a second
    or so, long before its 15 s timeout, and no `dot` process is left."""
    folder = tmp_path / "tab-close"
    shutil.copytree(planted[0] / "planted", folder / "planted")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GRADKIT_GRAPH_MAX_LAUNCHES", "100000")
        serving = _serve(folder, tmp_path)
        server = next(serving)
    try:
        context = browser.new_context(viewport={"width": 1400, "height": 1600})
        context.set_default_timeout(TIMEOUT)
        tab = context.new_page()
        tab.goto(f"{server}/?bundle=planted&view=graph")
        expect(tab.locator("h1", has_text="Tape graph — planted")).to_be_visible()
        _settled(tab)
        assert _dot_processes_serving(folder) == []
        tab.get_by_text("Fold repeated launches").click()
        _wait_for(lambda: _dot_processes_serving(folder), 20, "dot did not start on the unfolded graph")
        context.close()
        took = _wait_for(lambda: not _dot_processes_serving(folder), 10, "dot was still running after the tab "
                         "closed")
        print(f"dot stopped {took:.2f} s after the tab closed")
        assert took < 5.0                    # the render timeout is 15 s: this was the cancellation
    finally:
        serving.close()


_NODE_BOXES = """(s, ids) => ids.map(id => {
    const g = [...s.querySelectorAll('g.node')].find(n => n.querySelector('title').textContent === id);
    const r = g.getBoundingClientRect(), v = document.getElementById('view').getBoundingClientRect();
    return {left: r.left, inside: r.left >= v.left && r.right <= v.right && r.top >= v.top && r.bottom <= v.bottom};
})"""


def test_the_folded_graph_opens_on_the_loss_with_a_loop_in_execution_order(page, planted, planted_server):
    """Issue 41 item 5 on the planted program: the folded graph opens with the loss in view, the four
    kernels of the folded time step drawn left to right in the order they run, and the facts panel of a
    clicked launch in 14 px text, 340 px wide."""
    from gradkit.app import data, graph_data
    bundle = data.open_bundle(planted[0] / "planted")
    loss = graph_data.loss_node(bundle)
    page.goto(f"{planted_server}/?bundle=planted&view=graph")
    frame = page.frame_locator('iframe[title="st.iframe"]')
    svg = frame.locator("#view svg")
    expect(svg).to_be_visible()
    _settled(page)
    assert svg.evaluate(_NODE_BOXES, [loss])[0]["inside"]
    frame.locator("#fit").click()
    step = [la["kernel"] for la in bundle.launches[:4]]
    assert step == ["wind_force", "spring_force", "drag_force", "integrate"]
    lefts = [b["left"] for b in svg.evaluate(_NODE_BOXES, ["l0", "l1", "l2", "l3"])]
    assert lefts == sorted(lefts) and len(set(lefts)) == 4, lefts
    svg.locator("g.node", has_text="spring_force").first.locator("text", has_text="spring_force").click()
    facts = frame.locator("#facts")
    expect(facts).to_contain_text("spring_force")
    expect(facts).to_contain_text("planted.py:")                      # the gk.launch call site
    style = facts.evaluate("f => [parseFloat(getComputedStyle(f).fontSize), f.getBoundingClientRect().width]")
    assert style[0] >= 14 and style[1] >= 340
    shoot(page, "planted-graph-facts")
