"""Every code block of the documentation runs (issue 25 item 4), so the docs cannot rot: each page's
`>>>` examples (Sphinx pages, the Markdown pages the site renders, the docstrings the API reference
shows) run in a fresh process on the cpu device, and must print what the page says they print.
A Python block that is not a doctest is refused by the docs build (`make docs`, test_docs_build.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from . import snippets

PAGES = snippets.rst_pages() + snippets.markdown_pages()


def _run(arg: str) -> str:
    env = dict(os.environ, PYTHONHASHSEED="0", COLUMNS="100")
    proc = subprocess.run([sys.executable, str(snippets.__file__.replace(".pyc", ".py")), arg],
                          capture_output=True, text=True, timeout=300, cwd=snippets.ROOT, env=env)
    assert proc.returncode == 0, proc.stdout[-8000:] + proc.stderr[-4000:]
    return proc.stdout


@pytest.mark.parametrize("page", PAGES, ids=snippets.page_id)
def test_page_examples_run(page):
    _run(snippets.page_id(page))


def test_docstring_examples_run():
    _run("--docstrings")


def test_every_page_is_collected():
    """The pages with code are all found (a page moved out of docs/ would silently stop being run)."""
    names = {snippets.page_id(p) for p in PAGES}
    for must in ("docs/index.rst", "docs/tutorials/reverse_mode.rst", "docs/porting/from_warp.rst",
                 "docs/porting/from_taichi.rst", "docs/errors.md", "docs/coverage.md", "backends/README.md",
                 "docs/faq.rst", "docs/differences.rst", "docs/gpu.rst", "docs/performance.rst"):
        assert must in names
    counted = sum(len(snippets.examples(p)) + len(snippets.scripts(p)) for p in PAGES)
    assert counted >= 150, counted
