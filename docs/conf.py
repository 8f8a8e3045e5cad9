"""Sphinx configuration for gradkit's documentation (`make docs`: HTML into docs/_build/html, warnings as
errors). reStructuredText with autodoc and napoleon (the docstrings' `Args:` sections) and the built-in
alabaster theme: nothing beyond Sphinx itself is needed. The repository's Markdown pages are rendered
by _ext/gradkit_docs.py."""

from __future__ import annotations

import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

import gradkit  # noqa: E402  (the installed package: pip install -e . or the wheel)

project = "gradkit"
author = "the gradkit developers"
copyright = "gradkit developers"
version = release = gradkit.__version__

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "gradkit_docs", "gallery"]
exclude_patterns = ["_build", "_ext", "**/*.md"]
root_doc = "index"
source_suffix = {".rst": "restructuredtext"}

# Docstrings write code as `x` (one backtick): show it as code. Python blocks are >>> doctests.
default_role = "code"
highlight_language = "none"
pygments_style = "sphinx"

autodoc_member_order = "bysource"
autodoc_typehints = "description"

napoleon_google_docstring = True
napoleon_numpy_docstring = False
add_module_names = False
python_use_unqualified_type_names = True
suppress_warnings = []
nitpicky = False

html_theme = "alabaster"
html_static_path = ["_static"]
html_title = f"gradkit {release}"
html_theme_options = {
    "description": "Differentiable kernels in Python: fast on CPU and GPU, exact gradients, visible gradient flow.",
    "fixed_sidebar": True,
    "page_width": "1180px",
    "sidebar_width": "240px",
}
html_sidebars = {"**": ["about.html", "navigation.html", "relations.html", "searchbox.html"]}
html_css_files = ["gradkit.css"]
