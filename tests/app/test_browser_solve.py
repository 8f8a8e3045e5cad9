"""The Poisson example's CG solve in Chromium (issue 45 item 3): the tape graph draws it as one node
reading "cg: N iterations, residual R" whose click shows its facts, and the Launches view lists it as a
Python step with the same numbers as the bundle. Screenshots: test-artifacts/app/solve-*.png."""

from __future__ import annotations

import pytest

from gradkit.app import cli, data
from tests.app import test_browser as tb
from tests.app.test_browser import CHROMIUM, _serve, expect, graph, open_view, shoot
from tests.app.test_solve_steps_app import EXAMPLES

browser, page = tb.browser, tb.page         # test_browser.py's Chromium fixtures, shared

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium found (apt-get install chromium, "
                                "as `make test` does as root; or set GRADKIT_CHROMIUM)")


@pytest.fixture(scope="module")
def solve_server(tmp_path_factory):
    """The debugger on a folder holding the captured Poisson example (yields (URL, its step's label))."""
    folder = tmp_path_factory.mktemp("solve-bundles")
    report = cli.capture_script(EXAMPLES / "poisson_source.py", ["--iters", "2", "--size", "8"], folder / "poisson")
    assert report.bundle is not None, report.error
    meta = data.open_bundle(folder / "poisson").steps[0]["meta"]
    label = f"cg: {meta['iterations']} iterations, residual {meta['residual']:.3g}"
    for url in _serve(folder, tmp_path_factory.mktemp("streamlit-solve")):
        yield url, label, meta


def test_graph_and_launches_show_the_cg_solve(page, solve_server):
    server, label, meta = solve_server
    assert meta["iterations"] > 0
    open_view(page, server, "poisson", "graph")
    frame, svg, _ = graph(page)
    node = svg.locator("g.node", has_text=f"cg: {meta['iterations']} iterations").first
    expect(node).to_contain_text(label)
    node.locator("text").first.click()
    facts = frame.locator("#facts")
    expect(facts).to_contain_text("Python step")
    expect(facts).to_contain_text(f"iterations={meta['iterations']}")
    expect(facts).to_contain_text("temperature u")                 # what the solve wrote
    shoot(page, "solve-graph")
    open_view(page, server, "poisson", "launches")
    expect(page.locator('[data-testid="stSidebar"]')).to_contain_text("1 launches · 1 Python step · 1 backward")
    expect(page.locator("h3", has_text="Python steps")).to_be_visible()
    steps = page.locator('[data-testid="stTable"]', has_text=label)
    expect(steps).to_be_visible()
    expect(steps).to_contain_text("before any launch")
    shoot(page, "solve-launches")
