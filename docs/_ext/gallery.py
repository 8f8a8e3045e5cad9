"""The gallery page, generated from examples/ in every docs build, so its pictures cannot drift.

``.. gradkit-gallery:`` (an rST comment) on a page becomes one section per example script: its docstring's
title and text, the command that runs it, and the picture the script draws itself
(``python examples/NAME.py --image PATH``, matplotlib, headless). Pictures are cached under
docs/_build/gallery keyed by the script's content hash, so a build re-runs only the examples that
changed. A script that fails fails the build (a warning under ``-W``); one that runs but draws nothing
(its optional dependency is missing: torch for the DDP example) gets a note instead of a picture, and so
does every script when matplotlib itself is missing (a docs-only install).
The sources are read with ``ast`` (never imported or executed here); each script runs in a subprocess.
"""

from __future__ import annotations

import ast
import concurrent.futures
import hashlib
import os
import pathlib
import re
import subprocess
import sys

DOCS = pathlib.Path(__file__).resolve().parents[1]
ROOT = DOCS.parent
EXAMPLES = ROOT / "examples"
CACHE = DOCS / "_build" / "gallery"
MARK = re.compile(r"^\.\. gradkit-gallery:[ \t]*$", re.M)
TIMEOUT_S = 300


def scripts(folder: pathlib.Path = EXAMPLES) -> list[pathlib.Path]:
    """The example scripts the gallery shows: every examples/*.py, and scripts one folder down (ported
    programs) that take ``--image``. Plugin packages (a pyproject.toml beside them) are not examples."""
    found = sorted(folder.glob("*.py"))
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and not (p / "pyproject.toml").exists()):
        found.extend(p for p in sorted(sub.glob("*.py")) if "--image" in p.read_text(encoding="utf-8"))
    return found


def key(script: pathlib.Path) -> str:
    """The cache key of a script's picture: its content hash (an edit redraws it)."""
    return hashlib.sha256(script.read_bytes()).hexdigest()[:16]


def picture(script: pathlib.Path, cache: pathlib.Path = CACHE, root: pathlib.Path = EXAMPLES):
    """Run `script --image` unless its picture is cached; returns (the PNG or None, the failure or '').
    Pictures of scripts in a sub-folder of `root` are cached in the same sub-folder of `cache`."""
    folder = cache / script.parent.relative_to(root)
    png = folder / f"{script.stem}-{key(script)}.png"
    if png.is_file():
        return png, ""
    if "--image" not in script.read_text(encoding="utf-8"):
        return None, (f"{script.name} takes no --image option: an example draws its own gallery picture "
                      "(see examples/README.md)")
    folder.mkdir(parents=True, exist_ok=True)
    tmp = png.with_suffix(f".{os.getpid()}.tmp.png")
    env = dict(os.environ, MPLBACKEND="Agg")
    try:
        run = subprocess.run([sys.executable, str(script), "--image", str(tmp)], cwd=script.parent, env=env,
                             capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, f"{script.name} took more than {TIMEOUT_S} s"
    if run.returncode != 0:
        return None, f"{script.name} exited with {run.returncode}:\n{(run.stdout + run.stderr)[-3000:]}"
    if not tmp.is_file():
        return None, ""                      # ran, drew nothing: an optional dependency is missing
    for old in folder.glob(f"{script.stem}-*.png"):
        if re.fullmatch(rf"{re.escape(script.stem)}-[0-9a-f]{{16}}\.png", old.name):
            old.unlink(missing_ok=True)      # the pictures of earlier versions of this script
    os.replace(tmp, png)
    return png, ""


def describe(script: pathlib.Path) -> tuple[str, str]:
    """(title, text) from the script's docstring: its first line, then its paragraphs without the
    Run:/Debug: lines (the page shows the command itself)."""
    doc = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or script.stem
    title, _, body = doc.partition("\n")
    paras = [p for p in re.split(r"\n\s*\n", body.strip())
             if p.strip() and not p.lstrip().startswith(("Run:", "Debug:", "Run ", "Usage"))]
    return title.strip(), "\n\n".join(" ".join(p.split()) for p in paras)


def showcase(folder: pathlib.Path = EXAMPLES) -> dict[str, tuple[str, str]]:
    """script name -> (what it shows, where to look in the debugger): the table of examples/README.md
    (rows `| `name.py` | shows | look |`; a row may name two scripts)."""
    readme = folder / "README.md"
    rows = {}
    if not readme.is_file():
        return rows
    for line in readme.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) == 3 and cells[0].startswith("`"):
            for name in re.findall(r"`([^`]+\.py)`", cells[0]):
                rows[name] = (cells[1], cells[2])
    return rows


def _escape(text: str) -> str:
    """Docstrings write code as `x` (the site's default role shows it as code); escape rST's other marks
    outside those code spans."""
    parts = re.split(r"(`[^`]+`)", text)
    return "".join(p if i % 2 else re.sub(r"([*|\\]|(?<!\w)_|_(?!\w))", r"\\\1", p) for i, p in enumerate(parts))


def can_draw() -> bool:
    """Whether the scripts can draw: matplotlib (the `plot` extra) is importable by this Python."""
    import importlib.util
    return importlib.util.find_spec("matplotlib") is not None


def gallery_rst(cache: pathlib.Path = CACHE, folder: pathlib.Path = EXAMPLES, workers: int = 2):
    """The gallery's reStructuredText and the failures ([(script, message)]) of scripts that did not run.
    Without matplotlib (a docs-only install) the page says so instead of running the scripts."""
    found = scripts(folder)
    out, failures = [], []
    shows = showcase(folder)
    if can_draw():
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            results = list(pool.map(lambda s: picture(s, cache, folder), found))
    else:
        results = [(None, "") for _ in found]
        out.extend([".. note:: This build had no matplotlib, so the examples drew no pictures: install "
                    "``pip install 'gradkit[plot]'`` and run ``make docs`` again.", ""])
    for script, (png, error) in zip(found, results):
        if error:
            failures.append((script, error))
        title, text = describe(script)
        rel = script.relative_to(folder.parent)
        name = str(rel)
        out.extend([f".. _gallery-{script.stem}:", "", name, "-" * len(name), ""])
        if png is not None:
            uri = "/" + str(png.relative_to(DOCS)) if png.is_relative_to(DOCS) else str(png)
            out.extend([f".. image:: {uri}", f"   :alt: the picture {script.name} draws",
                        "   :class: gk-gallery-image", ""])
        elif not error:
            out.extend([f"*({script.name} drew no picture here: its optional dependency is not installed "
                        "where this site was built.)*", ""])
        out.extend([f"**{_escape(title)}**", ""])
        if text:
            out.extend([_escape(text), ""])
        if script.name in shows:
            what, where = shows[script.name]
            out.extend([f"*Shows:* {_escape(what)}", ""])
            if where.strip("— "):
                out.extend([f"*In the debugger:* {_escape(where)}", ""])
        args = "" if script.stem == "quickstart" else " --device cpu"
        out.extend(["Run it, and open it in the debugger:", "", ".. code-block:: console", "",
                    f"   python {rel}{args}", f"   gradkit debug {rel}", ""])
    return "\n".join(out) + "\n", failures


def _source_read(app, docname, source):
    if not MARK.search(source[0]):
        return
    from sphinx.util import logging
    log = logging.getLogger(__name__)
    rst, failures = gallery_rst()
    for script, error in failures:
        log.warning(f"gallery: {error}", location=docname)
    for script in scripts():
        app.env.note_dependency(str(script))
    app.env.note_dependency(str(EXAMPLES / "README.md"))
    source[0] = MARK.sub(lambda m: rst, source[0])


def setup(app):
    app.connect("source-read", _source_read)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
