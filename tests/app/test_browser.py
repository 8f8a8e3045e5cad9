"""The debugger in a real browser: Streamlit serves a folder of bundles, Debian's Chromium (driven by
Playwright, never a downloaded browser) opens each view and checks what it shows; clicking a launch row
shows its detail. Screenshots go to test-artifacts/app/ (GRADKIT_TEST_ARTIFACTS overrides the folder).
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess

import pytest

pytest.importorskip("streamlit", reason="the debugger needs Streamlit: pip install 'gradkit[app]'")
sync_api = pytest.importorskip("playwright.sync_api", reason="browser tests need Playwright: "
                               "pip install 'gradkit[browser]'")

from gradkit.app import cli  # noqa: E402
from gradkit.app.ui import VIEWS  # noqa: E402

expect = sync_api.expect
ROOT = pathlib.Path(__file__).resolve().parents[2]
ARTIFACTS = pathlib.Path(os.environ.get("GRADKIT_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "app"
TIMEOUT = 30_000    # ms; a first page load compiles nothing but does start a Streamlit session
# expect() has its own 5 s default: too short for a first page while xdist keeps both cores busy
expect.set_options(timeout=TIMEOUT)


def _chromium() -> str | None:
    for candidate in (os.environ.get("GRADKIT_CHROMIUM"), "chromium", "chromium-browser"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    return None


CHROMIUM = _chromium()
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium found (apt-get install chromium, "
                                "as `make test` does as root; or set GRADKIT_CHROMIUM)")


def _serve(folder, log_dir):
    """Streamlit on a folder of bundles, on a free port (yields its URL); its log is shown if it fails to
    start."""
    port = cli.free_port()
    log = log_dir / "streamlit.log"
    cmd = cli.app_command(folder, port, extra=("--server.fileWatcherType", "none"))
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
    try:
        if not cli.wait_for_health(port, proc, timeout=60):
            pytest.fail(f"streamlit did not start:\n{log.read_text()}")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="module")
def server(bundle_dir, tmp_path_factory):
    """The debugger on the test scripts' bundles."""
    yield from _serve(bundle_dir, tmp_path_factory.mktemp("streamlit"))


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1600})
    context.set_default_timeout(TIMEOUT)
    pg = context.new_page()
    yield pg
    context.close()


def open_view(page, server: str, bundle: str, view: str) -> None:
    page.goto(f"{server}/?bundle={bundle}&view={view}")
    expect(page.locator("h1", has_text=f"{VIEWS[view]} — {bundle}")).to_be_visible()
    _settled(page)


def _settled(page) -> None:
    """Wait until the script run finished (no 'running' status widget)."""
    page.wait_for_timeout(300)
    expect(page.locator('[data-testid="stStatusWidget"]')).to_have_count(0)


def shoot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def choose(page, label: str, option: str) -> None:
    """Pick `option` in the selectbox labelled `label`."""
    page.locator('[data-testid="stSelectbox"]', has_text=label).click()
    page.get_by_role("option", name=option, exact=True).click()
    _settled(page)


def test_launches_table_and_detail(page, server):
    open_view(page, server, "train", "launches")
    metrics = page.locator('[data-testid="stMetric"]')
    expect(metrics.filter(has_text="forward launches")).to_contain_text("3")
    expect(metrics.filter(has_text="backward launches")).to_contain_text("3")
    grid = page.locator('[data-testid="stDataFrame"]').first
    rows = grid.locator('[role="row"]')
    expect(rows).to_have_count(7)                                 # header + 3 forward + 3 backward
    expect(rows.nth(5)).to_contain_text("backwardpredictadjoint16cpu")       # the variant that ran: adjoint
    expect(rows.nth(3)).to_contain_text("squared_error")
    expect(page.locator("h3", has_text="#0 forward damp [16]")).to_be_visible()
    shoot(page, "launches")
    # Click the row-selection cell of table row 4 (the adjoint launch of predict).
    box = grid.bounding_box()
    header = row = 35                                             # Streamlit's default row height (px)
    page.mouse.click(box["x"] + 15, box["y"] + header + row * 4 + row / 2)
    _settled(page)
    expect(page.locator("h3", has_text="#4 backward predict [16] (of forward #1)")).to_be_visible()
    tables = page.locator('[data-testid="stTable"]')
    expect(tables.nth(0)).to_contain_text("pred")                 # arguments: x, g, w, b, pred
    expect(tables.nth(0)).to_contain_text("w")
    expect(tables.nth(2)).to_contain_text("gradient")             # gradient statistics of this adjoint launch
    shoot(page, "launches-detail")


def graph(page):
    """The tape graph's interactive frame: (frame, its SVG, the viewport div). A rerun under load can leave
    the previous run's frame in the page a moment: wait until only the current one is there."""
    expect(page.locator('iframe[title="st.iframe"]')).to_have_count(1)
    frame = page.frame_locator('iframe[title="st.iframe"]')
    svg = frame.locator("#view svg")
    expect(svg).to_be_visible()
    return frame, svg, frame.locator("#view")


def test_tape_graph_shows_cut_off_arrays(page, server):
    open_view(page, server, "train", "graph")
    _, svg, _ = graph(page)
    for text in ("damp", "predict", "squared_error", "target", "feature"):
        expect(svg).to_contain_text(text)
    # The two arrays without requires_grad are drawn pink (and dashed).
    expect(svg.locator('ellipse[fill="#ffd6d6"]')).to_have_count(2)
    expect(page.get_by_text("'w' has requires_grad=False")).to_be_visible()
    shoot(page, "graph")


def _text_px(svg, text: str) -> float:
    """On-screen height in CSS pixels of the first SVG text element reading `text`."""
    return svg.locator("text", has_text=text).first.evaluate("t => t.getBoundingClientRect().height")


def test_graph_of_111_launches_zooms_pans_and_explains_nodes(page, server):
    """A rollout of 111 launches (50 steps in scope solve/step, a kick every 5th): folded to a dozen launch
    boxes, drawn at a readable scale; the wheel zooms, a drag pans, a click on a launch shows its facts."""
    open_view(page, server, "rollout", "graph")
    frame, svg, view = graph(page)
    titles = svg.locator("g.node title").all_text_contents()
    assert 1 <= sum(t.startswith("l") for t in titles) <= 16          # launch boxes after folding
    assert float(view.get_attribute("data-scale")) >= 0.9
    assert _text_px(svg, "clamp_field") >= 9                     # readable without zooming
    shoot(page, "graph-rollout")
    box = view.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    before = float(view.get_attribute("data-scale"))
    page.mouse.wheel(0, -500)
    expect(view).not_to_have_attribute("data-scale", f"{before:.4f}")
    assert float(view.get_attribute("data-scale")) > before * 1.5
    viewbox = svg.get_attribute("viewBox")
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] / 2 - 120, box["y"] + box["height"] / 2 - 80, steps=5)
    page.mouse.up()
    assert svg.get_attribute("viewBox") != viewbox               # dragged: another part of the graph
    frame.locator("#fit").click()
    node = svg.locator("g.node", has_text="clamp_field").first
    node.locator("text", has_text="clamp_field").click()
    facts = frame.locator("#facts")
    expect(facts).to_contain_text("clamp_field")
    expect(facts).to_contain_text("sample_rollout.py:")          # the gk.launch call site
    expect(facts).to_contain_text("solve / step")
    shoot(page, "graph-facts")
    svg.locator("g.node", has_text="initial field").locator("ellipse").click()
    expect(facts).to_contain_text("gradient flow")
    expect(facts).to_contain_text("float32[16]")


def test_graph_search_and_collapsed_scopes(page, server):
    open_view(page, server, "rollout", "graph")
    page.get_by_label("Search kernels and arrays").fill("kick")
    page.keyboard.press("Enter")
    _settled(page)
    expect(page.get_by_text("'kick': 10 launches and 10 arrays match")).to_be_visible()
    _, svg, _ = graph(page)
    expect(svg.locator('polygon[stroke="#ff7f0e"]').first).to_be_attached()    # the kick launch outlined
    expect(svg.locator('ellipse[stroke="#ff7f0e"]').first).to_be_attached()    # a kicked[...] array
    expect(page.locator('iframe[title="st.iframe"]')).to_have_count(1)
    frame = page.frame_locator('iframe[title="st.iframe"]')
    expect(frame.locator("#facts")).to_contain_text("kick")                     # opened on the first match
    selected = frame.locator("g.node.gk-selected")
    inside = selected.evaluate("""n => { const r = n.getBoundingClientRect(),
        v = document.getElementById('view').getBoundingClientRect();
        return r.left >= v.left && r.right <= v.right && r.top >= v.top && r.bottom <= v.bottom; }""")
    assert inside                                                               # ... and shows it
    shoot(page, "graph-search")
    page.get_by_label("Search kernels and arrays").fill("")
    page.keyboard.press("Enter")
    _settled(page)
    page.locator('[data-testid="stMultiSelect"]').click()
    page.get_by_role("option", name="solve", exact=True).click()
    page.keyboard.press("Escape")
    _settled(page)
    _, svg, _ = graph(page)
    expect(svg).to_contain_text("solve (collapsed)")
    expect(svg).to_contain_text("110 launches: clamp_field, kick, relax")
    expect(svg).to_contain_text("109 intermediate arrays inside")
    assert svg.locator("g.node", has_text="mid[0]").count() == 0                 # drawn inside, not beside
    assert svg.locator("g.node", has_text="relax [16]").count() == 0            # inside the collapsed node
    shoot(page, "graph-collapsed")


@pytest.fixture(scope="module")
def examples_server(example_bundles, tmp_path_factory):
    """The debugger on the bundled examples' bundles (as `gradkit examples` serves them)."""
    yield from _serve(example_bundles, tmp_path_factory.mktemp("streamlit-examples"))


def test_cloth_graph_is_readable_at_its_default_size(page, examples_server):
    """The cloth example records 120+ launches; its graph opens folded, every launch box's kernel name at
    least 9 px tall, the whole graph in view or pannable from its top left."""
    open_view(page, examples_server, "cloth_trajectory", "graph")
    _, svg, view = graph(page)
    assert float(view.get_attribute("data-scale")) >= 0.9
    for kernel in ("spring_forces", "integrate", "pose_loss"):
        expect(svg).to_contain_text(kernel)
    assert _text_px(svg, "spring_forces") >= 9
    assert _text_px(svg, "integrate") >= 9
    shoot(page, "graph-cloth")


def test_gradient_flow_flags_and_histogram(page, server):
    open_view(page, server, "train", "flow")
    expect(page.locator('[data-testid="stAlert"]', has_text="feature — vanishing")).to_be_visible()
    expect(page.locator('[data-testid="stAlert"]', has_text="w — cut off")).to_be_visible()
    expect(page.locator('[data-testid="stAlert"]', has_text="— zero")).to_have_count(0)   # pred, g: consumed
    charts = page.locator('[data-testid="stVegaLiteChart"]')
    # norms, histogram, then the history: loss, norms and the distribution over the three iterations
    expect(charts).to_have_count(5)
    expect(page.get_by_text("History over iterations")).to_be_visible()
    expect(page.get_by_text("loss (log scale)")).to_have_count(1)           # a titled, log-scale loss axis
    choose(page, "Gradient of", "b")
    expect(page.get_by_role("combobox", name="Gradient of")).to_have_value("b")
    shoot(page, "flow")


def test_overwritten_wind_is_zero_with_the_hazard_named(page, server):
    """The rope's wind force is overwritten before it is read: the flow view flags wind zero and says why,
    naming both kernels and lines (relative to the bundle, not the recording machine's paths)."""
    open_view(page, server, "rope", "flow")
    alert = page.locator('[data-testid="stAlert"]', has_text="wind — zero")
    expect(alert).to_be_visible()
    expect(alert).to_contain_text("overwritten before read")
    expect(alert).to_contain_text("wind_force")
    expect(alert).to_contain_text("spring_force")
    expect(page.locator('[data-testid="stAlert"]', has_text="Hazard (not differentiable)")).to_be_visible()
    assert str(ROOT) not in page.locator("body").inner_text()
    shoot(page, "flow-hazard")


def test_nan_origin_forward(page, server):
    open_view(page, server, "nan", "nan")
    hit = page.locator(".gk-nan-line")
    expect(hit).to_have_count(1)
    expect(hit).to_contain_text("e[i] = gk.log(y[i])")
    expect(hit).to_contain_text("18")
    metrics = page.locator('[data-testid="stMetric"]')
    expect(metrics.filter(has_text="kernel")).to_contain_text("log_energy")
    expect(metrics.filter(has_text="pass")).to_contain_text("forward")
    expect(page.get_by_text("forward launch #1")).to_be_visible()
    expect(page.locator('[data-testid="stTable"]').last).to_contain_text("-0.35")   # y at the element
    expect(page.locator('[data-testid="stSidebar"]')).to_contain_text("NaN/Inf recorded")
    # the op, its line, the gk.launch call site and the tape iteration, named at the top
    expect(page.locator(".gk-nan-op")).to_contain_text("log")
    facts = page.locator(".gk-nan-fact")
    expect(facts.filter(has_text="operation")).to_contain_text("log")
    expect(facts.filter(has_text="line")).to_contain_text("sample_nan.py:18")
    expect(facts.filter(has_text="call site")).to_contain_text("sample_nan.py:36")
    expect(facts.filter(has_text="iteration")).to_contain_text("0")
    shoot(page, "nan")


def test_nan_origin_backward(page, server):
    open_view(page, server, "sqrt", "nan")
    expect(page.locator(".gk-nan-line")).to_contain_text("r[i] = gk.sqrt(x[i])")
    expect(page.locator('[data-testid="stMetric"]').filter(has_text="pass")).to_contain_text("backward")
    expect(page.get_by_text("adjoint of forward launch #0")).to_be_visible()
    # the adjoint op of sqrt at x = 0: 0.5 / sqrt(0) = inf, tied to the forward sqrt(0.0)
    expect(page.locator(".gk-nan-op")).to_contain_text("sqrt(0.0) = 0.0")
    expect(page.locator(".gk-nan-op")).to_contain_text("inf")
    expect(page.locator(".gk-nan-fact").filter(has_text="call site")).to_contain_text("sample_sqrt.py:31")
    expect(page.get_by_text("backward() called at sample_sqrt.py:33")).to_be_visible()
    shoot(page, "nan-backward")


def test_no_nan(page, server):
    open_view(page, server, "train", "nan")
    expect(page.get_by_text("No NaN or Inf was recorded")).to_be_visible()


def test_code_view(page, server):
    open_view(page, server, "train", "code")
    choose(page, "Kernel", "predict")
    expect(page.locator('[data-testid="stTabPanel"]').first).to_contain_text("def predict")
    page.get_by_role("tab", name="Adjoint IR").click()
    expect(page.get_by_role("tabpanel")).to_contain_text("kernel predict_adjoint")
    page.get_by_role("tab", name="Generated code").click()
    panel = page.get_by_role("tabpanel")
    expect(panel.locator('[data-testid="stCode"]')).to_have_count(0)      # drawn only once picked
    choose(page, "Generated code of", "cpu forward")
    expect(page.get_by_role("tabpanel")).to_contain_text("define")         # LLVM IR
    shoot(page, "code")


def test_code_view_passes_tab(page, server):
    """The Passes tab shows the adjoint variant's reverse step: the IR before and after it, and their diff."""
    open_view(page, server, "train", "code")
    choose(page, "Kernel", "predict")
    page.get_by_role("tab", name="Passes").click()
    choose(page, "Variant", "adjoint")
    _settled(page)
    # the selectbox labelled exactly "Pass" (the hidden Code tab holds others whose text contains "pass");
    # choosing the variant reruns the page, and a busy machine can still show the old one for a moment
    passes = page.locator('[data-testid="stSelectbox"]', has=page.get_by_text("Pass", exact=True))
    expect(passes).to_have_count(1)
    passes.click()
    page.get_by_role("option").filter(has_text="reverse").click()
    _settled(page)
    panel = page.get_by_role("tabpanel")
    expect(panel).to_contain_text("After — 6. reverse")
    codes = panel.locator('[data-testid="stCode"]')
    expect(codes).to_have_count(3)                                # before, after, diff
    expect(codes.nth(0)).to_contain_text("kernel predict(")
    expect(codes.nth(1)).to_contain_text("kernel predict_adjoint(")
    expect(codes.nth(2)).to_contain_text("+++ 6. reverse")
    shoot(page, "code-passes")


def test_check_runs_gradcheck(page, server):
    open_view(page, server, "train", "check")
    choose(page, "Forward launch", "#1 forward predict [16]")
    expect(page.get_by_text("SHA-256 ")).to_be_visible()                   # the source and its hash, shown
    expect(page.locator('[data-testid="stCode"]').first).to_contain_text("def predict")
    run = page.get_by_role("button", name="Run gradcheck")
    expect(run).to_be_disabled()                                          # nothing compiles before opt-in
    page.get_by_text("I have read this source; compile it").click()
    _settled(page)
    expect(run).to_be_enabled()
    run.click()
    expect(page.get_by_text("The gradient of 'predict' is right on cpu")).to_be_visible()    # verdict first
    expect(page.get_by_text("gradcheck passed for 'predict' on cpu.")).to_be_visible()
    pairs = page.locator('[data-testid="stDataFrame"] [role="row"]')
    expect(pairs).to_have_count(5)                                # header + 4 (pred, input) pairs
    shoot(page, "check")


def test_no_absolute_paths_in_views(page, server):
    """Files are shown relative to the bundle's folder or by name: no view renders the recording machine's
    absolute paths."""
    for bundle, view in (("nan", "nan"), ("train", "code"), ("train", "check"), ("train", "launches")):
        open_view(page, server, bundle, view)
        if view == "code":
            choose(page, "Kernel", "predict")
        text = page.locator("body").inner_text()
        assert str(ROOT) not in text, f"{view} view shows an absolute path"
    open_view(page, server, "nan", "nan")
    expect(page.get_by_text("sample_nan.py:18").first).to_be_visible()


def test_check_without_snapshots(page, server):
    open_view(page, server, "plain", "check")
    expect(page.get_by_text("has no stored 'before' snapshot")).to_be_visible()


def test_landing_overview_one_click_to_the_nan_op(page, server):
    """The landing page lists every bundle with its status, problems first; one click on the NaN line opens
    the NaN/Inf view naming the op, its line, the gk.launch call site and the iteration."""
    page.goto(server)
    expect(page.locator("h1", has_text="Overview")).to_be_visible()
    _settled(page)
    rows = page.locator(".gk-bundle-row")
    expect(rows.first).to_contain_text("NaN/Inf")                               # problems sort first
    expect(page.locator(".gk-bundle-row", has_text="train")).to_contain_text("cut off from the gradient: w")
    shoot(page, "overview")
    _click_nan_line(page, "sqrt", line="sample_sqrt.py:15", call_site="sample_sqrt.py:31", iteration="0")
    shoot(page, "overview-to-nan")


def _click_nan_line(page, bundle: str, line: str, call_site: str, iteration: str) -> None:
    """From the landing page, one click on bundle's NaN line: the NaN/Inf view names sqrt(0.0), its line,
    the gk.launch call site and the iteration."""
    _bundle_row(page, bundle).locator("a.gk-link", has_text="NaN/Inf: sqrt").click()     # the one click
    expect(page.locator("h1", has_text=f"NaN/Inf origin — {bundle}")).to_be_visible()
    _settled(page)
    expect(page.locator(".gk-nan-op")).to_contain_text("sqrt(0.0) = 0.0")
    facts = page.locator(".gk-nan-fact")
    expect(facts.filter(has_text="line")).to_contain_text(line)
    expect(facts.filter(has_text="call site")).to_contain_text(call_site)
    expect(facts.filter(has_text="iteration")).to_contain_text(iteration)


def _bundle_row(page, name: str):
    """The overview row of bundle `name` (its first cell links to it by exactly that name)."""
    return page.locator(".gk-bundle-row", has=page.get_by_role("link", name=name, exact=True))


def test_launch_link_opens_the_offending_launch(page, server):
    page.goto(server)
    _settled(page)
    _bundle_row(page, "sqrt").locator("a.gk-link", has_text="the launch").click()
    expect(page.locator("h1", has_text="Launches — sqrt")).to_be_visible()
    _settled(page)
    expect(page.locator("h3", has_text="backward root")).to_be_visible()         # the adjoint that wrote inf


def test_sidebar_switches_bundle_and_view(page, server):
    page.goto(server)
    expect(page.locator("h1", has_text="Overview")).to_be_visible()      # the landing view
    _settled(page)
    page.locator('[data-testid="stSidebar"]').get_by_text("Launches", exact=True).click()
    expect(page.locator("h1", has_text="Launches — nan")).to_be_visible()      # first bundle
    choose(page, "Bundle", "train")
    expect(page.locator("h1", has_text="Launches — train")).to_be_visible()
    page.locator('[data-testid="stSidebar"]').get_by_text("Tape graph").click()
    expect(page.locator("h1", has_text="Tape graph — train")).to_be_visible()
    assert "view=graph" in page.url and "bundle=train" in page.url


def test_compare_before_and_after_a_fix(page, server):
    """Compare view: sqrt (inf in backward) beside sqrt_fixed; the URL names B, the changes are listed and
    the gradient-flow table leads with x going from NaN/Inf to ok."""
    page.goto(f"{server}/?bundle=sqrt&view=compare&other=sqrt_fixed")
    expect(page.locator("h1", has_text="Compare — sqrt")).to_be_visible()
    _settled(page)
    expect(page.get_by_text("A = sqrt · B = sqrt_fixed")).to_be_visible()
    changed = page.locator('[data-testid="stMarkdownContainer"]', has_text="Changed:")
    expect(changed).to_contain_text("status")
    expect(changed).to_contain_text("NaN/Inf origin")
    flow = page.locator('[data-testid="stDataFrame"]').nth(1)
    rows = flow.locator('[role="row"]')
    expect(rows.nth(1)).to_contain_text("x")
    expect(rows.nth(1)).to_contain_text("NaN/Inf")
    expect(rows.nth(1)).to_contain_text("ok")
    shoot(page, "compare")
    choose(page, "Compare with (B)", "train")
    expect(page).to_have_url(re.compile(r"[?&]other=train(&|$)"))         # a busy machine updates it late
    expect(page.get_by_text("A = sqrt · B = train")).to_be_visible()


def test_sqrt_of_a_zero_length_spring_in_a_loop_one_click_from_landing(page, server):
    """Issue 22's acceptance case: dist = sqrt(dot(d, d)) hits 0 at iteration 3 of a loop (NaN in backward
    only). From the landing page one click names sqrt, its line, the gk.launch call site and iteration 3."""
    page.goto(server)
    _settled(page)
    expect(_bundle_row(page, "springs")).to_contain_text("NaN/Inf: sqrt at sample_springs.py:14, iteration 3")
    _click_nan_line(page, "springs", line="sample_springs.py:14", call_site="sample_springs.py:24", iteration="3")
    shoot(page, "springs-nan")


def test_check_view_reruns_in_float64(page, examples_server):
    """The gravity example's energy gradient fails a float32 gradcheck on most entries; the Check view says
    the failures are within finite-difference noise and its float64 re-run passes."""
    open_view(page, examples_server, "gravity_forces", "check")
    page.get_by_text("I have read this source; compile it").click()
    _settled(page)
    page.get_by_role("button", name="Run gradcheck").click()
    _settled(page)
    expect(page.get_by_text("within twice their finite-difference noise estimate")).to_be_visible(timeout=60_000)
    expect(page.get_by_text("The gradient of 'potential_energy' is right: it passes in float64")).to_be_visible()
    expect(page.locator('[data-testid="stDataFrame"]').first).to_be_visible()
    page.wait_for_timeout(1000)                                   # let the data grids paint for the screenshot
    shoot(page, "check-float64")
