"""A bundle and a debugger URL are data from someone else (no browser here; test_browser_hostile.py opens
every view): bundle text is made plain for Markdown and HTML, the tape graph draws it as text, the command
line prints it as text, bad URL parameters are a message in the page (never a traceback), and malformed
arrays.npz member names or array ids are a `BundleError` naming them."""

from __future__ import annotations

import html
import io
import json
import re
import shutil
import sys
import zipfile

import numpy as np
import pytest

from gradkit.app import cli, data, graph_component, graph_data
from gradkit.viz.bundle import BundleError
from tests.app.hostile import hostile_copy, literal, payload

HOST = "http://127.0.0.1:9"
HOSTILE = [payload(HOST, "x"), "x_y*z* `code` <b>b</b> &amp; &#60;img&#62; | a | b |\n---\n# h\n- item",
           ":smile: :material/home: :red[red] www.example.com a@b.example.com https://example.com/p",
           "$x^2$ \\(x\\) [ref]: http://example.com\n\n[ref] <http://example.com> ~~s~~ \\ trailing \\",
           "1. one\r\n  2) two\r   + three\n===\n> quote\n---\n***\n    code\n\t# tab"]


def _shown(markdown: str) -> str:
    """What Streamlit's Markdown draws for `markdown` made of plain text: escapes and WORD JOINERs gone."""
    return re.sub(r"\\(.)", r"\1", markdown, flags=re.S).replace("\u2060", "")


@pytest.mark.parametrize("text", HOSTILE)
def test_plain_markdown_draws_the_text_itself(text):
    from markdown_it import MarkdownIt
    from gradkit.app.ui import plain
    shown = plain(text)
    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").enable("strikethrough").render(shown)
    assert not re.search(r"<(?!/?p>)", rendered), rendered       # paragraphs only: no img, a, html, code ...
    assert html.unescape(re.sub(r"</?p>", "", rendered)).replace("\u2060", "").split() == text.split()
    assert _shown(shown) == re.sub(r"\r\n?", "\n", text)
    # what remark-gfm and remark-emoji would link or replace in the text nodes
    assert not re.search(r"https?:/|www\.|\w@|:\w+:", shown.replace("\\", ""))


@pytest.mark.parametrize("text", HOSTILE)
def test_plain_html_draws_the_text_itself(text):
    from markdown_it import MarkdownIt
    from gradkit.app.ui import plain_html
    block = f"<td>{plain_html(text)}</td>"
    rendered = MarkdownIt("commonmark", {"html": True}).render(block)
    assert rendered.strip() == block                              # one HTML block: nothing read as Markdown
    assert "\n" not in block and not re.search(r"[<>&\"'\[\]()!`*_]", plain_html(text).replace("&#", ""))
    assert html.unescape(plain_html(text)) == text


def test_flow_view_has_no_escaper_of_its_own():
    """One helper (app/ui.py) makes bundle text plain for every view."""
    from gradkit.app import view_flow
    assert not hasattr(view_flow, "_plain")


# URL parameters -------------------------------------------------------------------------------------------
BAD_LAUNCH = ["²", "٣", "１", "-1", "+1", "01", " 1", "1.0", "1e3", "0x1", "", "abc", "99999999999999999999", "6"]


@pytest.mark.parametrize("value", BAD_LAUNCH)
def test_bad_launch_parameter_is_a_bundle_error(value):
    from gradkit.app import query
    with pytest.raises(BundleError, match=r"URL parameter launch=.* is not a launch of this bundle"):
        query.launch_index(value, 6)


def test_launch_parameter():
    from gradkit.app import query
    assert query.launch_index(None, 6) is None
    assert [query.launch_index(str(k), 6) for k in range(6)] == list(range(6))
    with pytest.raises(BundleError, match="records no launches"):
        query.launch_index("0", 0)
    assert query.choice("view", "graph", ["overview", "graph"], "view") == "graph"
    with pytest.raises(BundleError, match=r"URL parameter view='nope' names no view here \(one of: a, b\)"):
        query.choice("view", "nope", ["a", "b"], "view")


@pytest.fixture
def app(bundle_dir, monkeypatch):
    """The debugger's page run in-process (streamlit.testing) on the test bundles: set query_params, run."""
    testing = pytest.importorskip("streamlit.testing.v1")
    monkeypatch.setattr(sys, "argv", ["main.py", str(bundle_dir)])

    def run(**params):
        at = testing.AppTest.from_file(str(cli.APP_MAIN), default_timeout=120)
        at.query_params.update(params)
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        return at
    return run


@pytest.mark.parametrize("params, message", [
    ({"view": "launches", "bundle": "train", "launch": v}, "URL parameter launch=") for v in
    ("²", "٣", "-1", "99999999999999999999", "x")] + [
    ({"view": "compare", "bundle": "sqrt", "other": "nope"}, "URL parameter other='nope' names no other bundle"),
    ({"view": "Launches'><img src=x>", "bundle": "train"}, "URL parameter view=\"Launches'><img src=x>\" names "
                                                             "no view here (one of: overview, launches"),
    ({"view": "launches", "bundle": "../etc"}, "URL parameter bundle='../etc' names no bundle of this folder"),
])
def test_bad_url_parameter_is_said_in_the_page(app, params, message):
    at = app(**params)
    warnings = [_shown(w.value) for w in at.warning]
    assert any(message in w for w in warnings), warnings
    assert any(t.value.startswith(("Launches", "Compare", "Overview")) for t in at.title)


def test_launch_parameter_in_the_page(app):
    """?launch=4 opens launch #4; ?launch=² says so and opens the first."""
    at = app(view="launches", bundle="train", launch="4")
    assert not at.warning
    assert "#4 backward predict [16] (of forward #1)" in [_shown(h.value) for h in at.subheader]
    at = app(view="launches", bundle="train", launch="²")
    assert [_shown(w.value) for w in at.warning] == [
        "URL parameter launch='²' is not a launch of this bundle (expected a launch number from 0 to 5): "
        "showing the default launch instead."]
    assert "#0 forward damp [16]" in [_shown(h.value) for h in at.subheader]


# arrays.npz member names and array ids ------------------------------------------------------------------
def _with_member(src, dst, name: str):
    """A copy of bundle folder `src` whose arrays.npz also holds member `name`."""
    shutil.copytree(src, dst)
    buf = io.BytesIO()
    with zipfile.ZipFile(dst / "arrays.npz", "a") as z:
        np.lib.format.write_array(buf, np.zeros(4, np.float32))
        z.writestr(name, buf.getvalue())
    return dst


@pytest.mark.parametrize("member", ["before/²/{aid}.npy", "after/٣/{aid}.npy", "before/01/{aid}.npy",
                                    "before//{aid}.npy", "before/-1/{aid}.npy", "before/0x1/{aid}.npy",
                                    "value/{aid}/x.npy", "value/../{aid}.npy", "grad/.npy", "before/0.npy",
                                    "value/{aid}\n.npy", "snapshot/0/{aid}.npy"])
def test_malformed_member_name_is_a_bundle_error(tmp_path, record_plain, member):
    b = data.open_bundle(record_plain(tmp_path / "b"))
    aid = b.manifest["arrays"][0]["id"]
    name = member.format(aid=aid)
    bad = _with_member(tmp_path / "b", tmp_path / "bad", name)
    with pytest.raises(BundleError) as exc:
        data.open_bundle(bad)
    assert repr(name) in str(exc.value) and "not a bundle entry" in str(exc.value)


@pytest.mark.parametrize("aid", ['a1" [label=<<IMG SRC="x">>]', "a 1", "a-1", "a.1", "", "a" * 65, "a²"])
def test_array_id_outside_letters_digits_and_underscore_is_refused(tmp_path, record_plain, aid):
    """Ids name arrays.npz entries and tape-graph nodes (written unquoted in DOT)."""
    b = record_plain(tmp_path / "b")
    m = json.loads((b / "manifest.json").read_text())
    m["arrays"][0]["id"] = aid
    (b / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(BundleError, match=r"arrays\[0\]\.id: .* is not 1 to 64 ASCII letters, digits and '_'"):
        data.open_bundle(b)


# The tape graph ---------------------------------------------------------------------------------------------
def test_tape_graph_draws_hostile_text_as_text(bundle_dir, tmp_path):
    """Labels that close the DOT string, open an HTML-like label with an IMG, use \\N / \\G escapes, hold
    'javascript:' or characters XML refuses are drawn as text: GraphViz renders the graph (no fallback),
    with no image and every piece in its text."""
    pytest.importorskip("graphviz")
    if shutil.which("dot") is None:
        pytest.skip("GraphViz's dot is not installed")
    b = hostile_copy(bundle_dir / "train", tmp_path / "train", HOST)
    text = (b / "manifest.json").read_text()            # characters XML refuses, in a label, kernel and param
    for field, extra in (("array-label", "\\u0000 \\u0001 \\ufffe"), ("kernel", "\\u0001<x>&amp;"),
                         ("param", "\\u0002 &#1;")):
        text = text.replace(f"f={field}-md)", f"f={field}-md) {extra}")
    (b / "manifest.json").write_text(text)
    bundle = data.open_bundle(b)
    svg = graph_component.render_svg(graph_data.graph_dot(bundle))
    assert "<image" not in svg and "<a " not in svg.replace("<a xlink:title", "")
    text = html.unescape(" ".join(re.findall(r"<text[^>]*>([^<]*)</text>", svg)))
    assert literal(HOST, "scope") in text and literal(HOST, "array-dtype") in text
    assert '"]; leak [label=<<IMG SRC="' in text and "\\N \\G <<B>b</B>>" in text
    assert "\ufffd<x>&amp;" in text and "\ufffd &#1;" in text and "\ufffd \ufffd \ufffd" in text


# The command line -------------------------------------------------------------------------------------------
MARKUP = "[bold]b[/bold] [link=http://127.0.0.1:9/leak]click[/link] [red]r y[i] :smile: \\"


@pytest.mark.parametrize("console", ["rich", "plain"])
def test_cli_prints_script_text_as_text(tmp_path, capsys, monkeypatch, console):
    """A traceback or NaN message holding rich markup is printed as its characters: no style, no terminal
    link, `y[i]` kept, with rich and without it."""
    if console == "plain":
        monkeypatch.setattr(cli, "_console", lambda quiet=False: cli._Plain())
    else:
        pytest.importorskip("rich")
    script = tmp_path / "raising.py"
    script.write_text(f"raise RuntimeError({MARKUP!r})\n")
    monkeypatch.setenv("COLUMNS", "400")                           # rich wraps at 80 columns otherwise
    assert cli.main(["debug", "--bundle-only", "--out", str(tmp_path / "b"), str(script)]) == 1
    err = capsys.readouterr().err
    assert f"RuntimeError: {MARKUP}" in err
    assert "\x1b]8;" not in err                                      # no OSC 8 terminal hyperlink
