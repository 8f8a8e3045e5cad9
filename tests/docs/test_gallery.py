"""The gallery generator (docs/_ext/gallery.py, issue 44 item 1) on planted example folders: a script's
own picture is shown and cached by the script's content (an edit redraws it, an unchanged script is not
run again); a script that fails, or takes no --image option, is reported (the docs build turns that into
an error); one that runs but draws nothing gets a note instead of a picture."""

from __future__ import annotations

import sys

import pytest

from . import snippets

sys.path.insert(0, str(snippets.DOCS / "_ext"))
import gallery  # noqa: E402

DRAWS = '''"""Draws a square.

It counts its runs in runs.txt, which the test reads.

Run: python draws.py
"""
import argparse, pathlib
p = argparse.ArgumentParser()
p.add_argument("--image")
a = p.parse_args()
runs = pathlib.Path(__file__).with_name("runs.txt")
runs.write_text(runs.read_text() + "x" if runs.exists() else "x")
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
fig, ax = plt.subplots()
ax.plot([0, 1, 1, 0, 0], [0, 0, 1, 1, 0])
fig.savefig(a.image)
'''


@pytest.fixture
def folder(tmp_path):
    pytest.importorskip("matplotlib")
    ex = tmp_path / "examples"
    ex.mkdir()
    (ex / "draws.py").write_text(DRAWS)
    (ex / "README.md").write_text("| script | what it shows | where to look |\n|---|---|---|\n"
                                  "| `draws.py` | a square | Launches |\n")
    return ex


def test_picture_is_shown_and_cached_by_content(folder, tmp_path):
    cache = tmp_path / "cache"
    rst, failures = gallery.gallery_rst(cache, folder)
    assert failures == []
    png = next(cache.glob("draws-*.png"))
    assert f".. image:: {png}" in rst and "**Draws a square.**" in rst and "counts its runs" in rst
    assert "Run: python" not in rst                       # the page shows the command itself
    assert "*Shows:* a square" in rst and "*In the debugger:* Launches" in rst   # from examples/README.md
    gallery.gallery_rst(cache, folder)
    assert (folder / "runs.txt").read_text() == "x"      # unchanged: not run again
    (folder / "draws.py").write_text(DRAWS + "# edited\n")
    gallery.gallery_rst(cache, folder)
    assert (folder / "runs.txt").read_text() == "xx"     # edited: redrawn, the old picture removed
    assert len(list(cache.glob("draws-*.png"))) == 1 and not png.exists()


def test_failing_and_optionless_scripts_are_reported(folder, tmp_path):
    (folder / "broken.py").write_text('"""Fails."""\nimport sys\nprint("--image")\nsys.exit(3)\n')
    (folder / "plain.py").write_text('"""No picture option."""\nprint("hello")\n')
    rst, failures = gallery.gallery_rst(tmp_path / "cache", folder)
    reasons = {script.name: error for script, error in failures}
    assert set(reasons) == {"broken.py", "plain.py"}
    assert "exited with 3" in reasons["broken.py"]
    assert "takes no --image option" in reasons["plain.py"]


def test_a_script_that_draws_nothing_gets_a_note(folder, tmp_path):
    (folder / "optional.py").write_text('"""Needs an optional package."""\nimport argparse\n'
                                        'argparse.ArgumentParser().add_argument("--image")\n')
    rst, failures = gallery.gallery_rst(tmp_path / "cache", folder)
    assert failures == []
    assert "optional.py drew no picture here" in rst


def test_without_matplotlib_the_page_says_so(folder, tmp_path, monkeypatch):
    monkeypatch.setattr(gallery, "can_draw", lambda: False)
    rst, failures = gallery.gallery_rst(tmp_path / "cache", folder)
    assert failures == [] and "no matplotlib" in rst and ".. image::" not in rst
    assert not (folder / "runs.txt").exists()              # nothing was run


def test_the_real_gallery_lists_every_example():
    names = {p.name for p in gallery.scripts()}
    assert {p.name for p in gallery.EXAMPLES.glob("*.py")} <= names
    assert all("--image" in p.read_text(encoding="utf-8") for p in gallery.scripts())
