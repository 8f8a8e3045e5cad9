"""`make docs` in CI (issue 25 item 4): the Sphinx site builds with warnings as errors — a broken
reference, a docstring that is not valid reStructuredText, or a Python block no test runs fails here —
and its API reference documents every name of `gk.__all__` and the submodules users touch."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

import gradkit as gk

ROOT = pathlib.Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    pytest.importorskip("sphinx", reason="make docs needs the docs extra (pip install 'gradkit[docs]')")
    out = tmp_path_factory.mktemp("docs")
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                           "-d", str(out / "doctrees"), str(ROOT / "docs"), str(out / "html")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-6000:]
    return out / "html"


def _inventory(html: pathlib.Path) -> set[str]:
    from sphinx.util.inventory import InventoryFile
    with open(html / "objects.inv", "rb") as fh:
        inv = InventoryFile.load(fh, "", lambda base, uri: uri)
    data = getattr(inv, "data", inv)          # Sphinx >= 8.2 returns an _Inventory
    return {name for entries in data.values() for name in entries}


def test_site_builds_without_warnings(site):
    for page in ("index", "tutorials/reverse_mode", "tutorials/debugger", "porting/from_warp",
                 "porting/from_taichi", "api/language", "reference/coverage", "reference/backends"):
        assert (site / f"{page}.html").is_file(), page
    assert (site / "_images" / "overview.png").is_file() or (site / "_static" / "debugger" / "overview.png").is_file()


def test_every_public_name_is_documented(site):
    documented = _inventory(site)
    missing = [n for n in gk.__all__ if f"gradkit.{n}" not in documented]
    assert not missing, f"names of gk.__all__ without an entry in the API reference: {missing}"
    for name in ("gradkit.autograd.jacobian", "gradkit.autograd.jacobian_fwd", "gradkit.autograd.gradcheck",
                 "gradkit.optim.Adam", "gradkit.optim.SGD", "gradkit.viz", "gradkit.viz.tape_graph", "gradkit.config",
                 "gradkit.backends.base.Backend", "gradkit.backends.base.Backend.compile", "gradkit.backends.available",
                 "gradkit.Tape.backward", "gradkit.ForwardMode", "gradkit.kernel", "gradkit.launch"):
        assert name in documented, name


def test_every_checked_object_has_a_reference_entry(site):
    """What test_reference_complete.py checks the docstrings of is also what the site shows (issue 44)."""
    from . import reference
    documented = _inventory(site)
    missing = [name for name in reference.public() if f"gradkit.{name}" not in documented]
    assert not missing, f"public objects without an entry in the API reference: {missing}"


def test_gallery_shows_every_example_with_its_picture(site):
    """Every example script has a section on the gallery page with the picture it drew (issue 44 item 1)."""
    import re
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    import gallery
    page = (site / "gallery.html").read_text(encoding="utf-8")
    for script in gallery.scripts():
        if script.stem == "torch_ddp_springs" and not _importable("torch"):
            continue                                    # it draws nothing without torch: the page says so
        m = re.search(rf'id="gallery-{re.escape(script.stem).replace("_", "-")}".*?<img[^>]*src="([^"]+)"', page, re.S)
        assert m, f"{script.name}: no picture on the gallery page"
        assert (site / m.group(1)).is_file(), m.group(1)


def _importable(name: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(name) is not None
