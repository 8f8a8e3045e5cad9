"""Sphinx glue for gradkit's docs: Markdown reference pages rendered in the site, the kernel-language
table generated from the builtins, and a check that every Python block in the site is run by a test.

* ``.. gradkit-markdown: PATH`` (an rST comment, so the page reads fine without this extension) is
  replaced by PATH converted to reStructuredText; ``.. gradkit-markdown: PATH nested`` puts the file's
  headings one level under the page's title (a Markdown file shown as a section of a page). The Markdown pages (docs/errors.md, docs/coverage.md,
  backends/README.md, ...) stay the single source: tests and generators read and write them.
* ``.. gradkit-language:`` is replaced by one ``py:function`` entry per kernel-language name
  (``gradkit.core.lang.NAMES``: ``gk.sin``, ``gk.tid``, ...) with its signature and its one-line doc.
* Python in the site is ``>>>`` doctest blocks, which tests/docs runs. A Python literal block that is
  not one fails the build (``-W``), except Markdown code that tests/docs checks another way
  (``python_fences`` below says how).

This module is also imported by tests/docs (by path), so the converter used to render a page is the
one used to find its code.
"""

from __future__ import annotations

import inspect
import pathlib
import re

DOCS = pathlib.Path(__file__).resolve().parents[1]
ROOT = DOCS.parent

MARKDOWN_MARK = re.compile(r"^\.\. gradkit-markdown: (\S+)(?:[ \t]+nested)?[ \t]*$", re.M)
LANGUAGE_MARK = re.compile(r"^\.\. gradkit-language:[ \t]*$", re.M)

# Markdown files linked from the converted pages, and the site page that renders each.
PAGES = {
    "errors.md": "reference/errors", "native.md": "reference/native", "coverage.md": "reference/coverage",
    "security.md": "reference/security", "threading.md": "reference/threading",
    "architecture.md": "reference/architecture", "backends/README.md": "reference/backends",
    "CHANGELOG.md": "changelog",
}

# Languages of blocks that are not Python (nothing to run).
NOT_PYTHON = {"text", "none", "console", "bash", "sh", "shell", "toml", "ini", "dot", "llvm", "c", "ir"}


# Markdown -> reStructuredText ---------------------------------------------------------------------------
def _escape(text: str) -> str:
    return re.sub(r"([\\*_`|])", r"\\\1", text)


def _joined(out: list[str], piece: str, before: str, after: str) -> None:
    """Append an inline markup `piece`, separated by an escaped space from adjacent word characters
    (rST ends inline markup only before whitespace or punctuation)."""
    if before and (before[-1].isalnum() or before[-1] in "_)"):
        out.append("\\ ")
    out.append(piece)
    if after and (after[0].isalnum() or after[0] in "_("):
        out.append("\\ ")


_INLINE = re.compile(r"(`+)(.+?)\1|\*\*(.+?)\*\*|\[([^\]]+)\]\(([^)\s]+)\)|(?<![\w*])\*(?!\s)([^*]+?)(?<!\s)\*(?![\w*])")


def inline(text: str, base: str = "") -> str:
    """One line of Markdown inline markup as rST: code, bold, italic, links (other Markdown pages
    become :doc: links; `base` is the folder of the page being converted, relative to the repo)."""
    out: list[str] = []
    pos = 0
    for m in _INLINE.finditer(text):
        out.append(_escape(text[pos:m.start()]))
        before, after = text[:m.start()], text[m.end():]
        if m.group(2) is not None:
            code = m.group(2).strip()
            if "`" in code:
                piece = ":code:`" + code.replace("\\", "\\\\").replace("`", "\\`") + "`"
            else:
                piece = "``" + code + "``"
        elif m.group(3) is not None:
            piece = f"**{_escape(m.group(3))}**"
        elif m.group(4) is not None:
            label, target = m.group(4), m.group(5)
            doc = PAGES.get(str(pathlib.PurePosixPath(base, target)) if base else target)
            if target.startswith(("http://", "https://")):
                piece = f"`{_escape(label)} <{target}>`__"
            elif doc:
                piece = f":doc:`{label.replace('`', '')} </{doc}>`"
            else:
                piece = _escape(label)
        else:
            piece = f"*{_escape(m.group(6))}*"
        _joined(out, piece, before, after)
        pos = m.end()
    out.append(_escape(text[pos:]))
    return "".join(out)


def _cells(row: str) -> list[str]:
    """The cells of a Markdown table row (a `|` inside backticks does not split)."""
    cells, cur, code = [], "", False
    for ch in row.strip().strip("|") if row.strip().endswith("|") else row.strip().lstrip("|"):
        if ch == "`":
            code = not code
        if ch == "|" and not code:
            cells.append(cur.strip())
            cur = ""
        else:
            cur += ch
    cells.append(cur.strip())
    return cells


FENCE = re.compile(r"^```(\S*)[ \t]*(.*)$")


def python_fences(text: str):
    """(language, info, code, line number) of each fenced block of a Markdown page."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m:
            start = i
            i += 1
            body = []
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            yield m.group(1) or "text", m.group(2), "\n".join(body) + "\n", start + 1
        i += 1


def md_to_rst(text: str, base: str = "", nested: bool = False) -> str:
    """Convert the Markdown the repository's pages use (ATX headings, paragraphs, lists, pipe tables,
    fenced code) to reStructuredText. `nested`: the headings the file uses, in order of depth, become the
    levels under a page title (``-``, ``~``, ``^``) instead of starting at a title's ``=``."""
    lines = text.splitlines()
    out: list[str] = []
    underline = {1: "=", 2: "-", 3: "~", 4: "^"}
    if nested:
        depths = sorted({len(m.group(1)) for m in re.finditer(r"^(#{1,4}) ", text, re.M)})
        underline = {d: "-~^\"'"[k] for k, d in enumerate(depths)}
    i = 0
    para: list[str] = []

    def flush():
        if para:
            out.extend([inline(" ".join(p.strip() for p in para), base), ""])
            para.clear()

    while i < len(lines):
        line = lines[i]
        fence = FENCE.match(line)
        heading = re.match(r"^(#{1,4}) (.*)$", line)
        if fence:
            flush()
            lang = fence.group(1) or "text"
            body = []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            i += 1
            is_doctest = lang == "python" and any(b.startswith(">>>") for b in body)
            if lang == "python" and not is_doctest:
                # run or checked by tests/docs (see test_doc_snippets.py); marked so the build allows it
                out.extend([".. code-block:: python", "   :class: gk-checked", ""])
            else:
                out.extend([f".. code-block:: {'pycon' if is_doctest else lang}", ""])
            out.extend(("   " + b) if b.strip() else "" for b in body)
            out.append("")
            continue
        if heading:
            flush()
            title = inline(heading.group(2), base)
            out.extend([title, underline[len(heading.group(1))] * max(len(title), 4), ""])
            i += 1
            continue
        if line.startswith("|") and i + 1 < len(lines) and re.match(r"^\|[\s:|-]+\|?\s*$", lines[i + 1]):
            flush()
            header = _cells(line)
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            out.extend([".. list-table::", "   :header-rows: 1", "   :class: gk-table", ""])
            for row in [header, *rows]:
                row = (row + [""] * len(header))[:len(header)]
                for k, cell in enumerate(row):
                    out.append(f"   {'* -' if k == 0 else '  -'} {inline(cell, base) or '..'}")
            out.append("")
            continue
        item = re.match(r"^(\s*)([-*]|\d+\.) (.*)$", line)
        if item:
            flush()
            indent = len(item.group(1))
            marker = "-" if item.group(2) in "-*" else "#."
            body = [item.group(3)]
            i += 1
            while i < len(lines) and lines[i].strip() and not re.match(r"^\s*([-*]|\d+\.) ", lines[i]) \
                    and not lines[i].startswith(("|", "```", "#")):
                body.append(lines[i].strip())
                i += 1
            pad = " " * (indent // 2 * 2 + (indent and 2))
            if indent and out and out[-1] != "":
                out.append("")
            out.append(f"{pad}{marker} {inline(' '.join(body), base)}")
            if i < len(lines) and not lines[i].strip():
                out.append("")
            continue
        if not line.strip():
            flush()
            i += 1
            continue
        para.append(line)
        i += 1
    flush()
    return "\n".join(out) + "\n"


# The kernel-language table --------------------------------------------------------------------------------
# Signatures of the names whose arity the builtins table does not give (variadic or host-side helpers).
SIGNATURES = {
    "tid": "()", "static": "(expr)", "adjoint": "[x]", "identity": "(*, n, dtype)",
    "atomic_add": "(arr, *idx, value)", "atomic_sub": "(arr, *idx, value)", "atomic_min": "(arr, *idx, value)",
    "atomic_max": "(arr, *idx, value)", "select": "(cond, value_if_false, value_if_true)",
    "where": "(cond, value_if_true, value_if_false)", "clamp": "(x, lo, hi)", "pow": "(a, b)",
    "min": "(a, b)", "max": "(a, b)", "atan2": "(y, x)", "mul": "(a, b)", "sqrt": "(x)",
    "quat_mul": "(q, r)", "quat_identity": "(dtype=gk.float32)", "quat_from_axis_angle": "(axis, angle)",
    "quat_rpy": "(roll, pitch, yaw)", "quat_inverse": "(q)", "quat_rotate": "(q, v)", "quat_rotate_inv": "(q, v)",
    "quat_to_matrix": "(q)", "quat_to_axis_angle": "(q)", "rand_init": "(seed, offset=0)",
    "randf": "(state, lo=0.0, hi=1.0)", "randi": "(state, lo=None, hi=None)", "randn": "(state)",
    "svd3": "(A)", "svd2": "(A)", "qr3": "(A)", "eig3": "(A)", "polar_decompose": "(A)",
}
GROUPS = [
    ("Threads, compile time and adjoints", ["tid", "static", "adjoint"]),
    ("Scalar math", ["abs", "sign", "floor", "ceil", "round", "clamp", "min", "max", "pow", "sqrt", "rsqrt",
                     "exp", "log", "log2", "log10", "sin", "cos", "tan", "asin", "acos", "atan", "atan2",
                     "sinh", "cosh", "tanh", "erf", "where", "select"]),
    ("Vectors and matrices", ["dot", "cross", "length", "length_sq", "normalize", "outer", "transpose",
                              "determinant", "inverse", "trace", "identity", "mul"]),
    ("Atomics", ["atomic_add", "atomic_sub", "atomic_min", "atomic_max"]),
    ("Quaternions", ["quat_mul", "quat_identity", "quat_from_axis_angle", "quat_rpy", "quat_inverse",
                     "quat_rotate", "quat_rotate_inv", "quat_to_matrix", "quat_to_axis_angle"]),
    ("Random numbers", ["rand_init", "randf", "randi", "randn"]),
    ("Matrix decompositions", ["svd3", "svd2", "qr3", "eig3", "polar_decompose"]),
]


def language_names() -> dict:
    from gradkit.core.lang import NAMES
    return NAMES


def signature(name: str, fn) -> str:
    if name in SIGNATURES:
        return SIGNATURES[name]
    from gradkit.core.builtins import BUILTINS
    arity = getattr(BUILTINS.get(fn.prim), "arity", None)
    return "(" + ", ".join(["x", "a, b", "a, b, c"][arity - 1].split(", ") if arity else ["*args"]) + ")"


def language_rst() -> str:
    names = language_names()
    grouped = [n for _, group in GROUPS for n in group]
    missing = [n for n in names if n not in grouped]
    groups = GROUPS + ([("Other", missing)] if missing else [])
    out = []
    for title, group in groups:
        out.extend([title, "-" * len(title), ""])
        for name in group:
            fn = names[name]
            doc = " ".join(inspect.cleandoc(fn.__doc__ or "").split()) or "(no description)"
            sig = signature(name, fn)
            if sig.startswith("["):
                out.extend([f".. py:data:: gradkit.{name}", ""])
                doc = f"``gk.{name}{sig}`` — {doc}"
            else:
                out.extend([f".. py:function:: gradkit.{name}{sig}", ""])
            out.extend([f"   {_escape(doc) if '``' not in doc else doc}", ""])
    return "\n".join(out) + "\n"


# Sphinx hooks ---------------------------------------------------------------------------------------------
def _source_read(app, docname, source):
    text = source[0]

    def markdown(m):
        path = (DOCS / app.env.doc2path(docname, False)).parent / m.group(1)
        path = path.resolve()
        app.env.note_dependency(str(path))
        base = str(path.parent.relative_to(ROOT)) if path.parent != ROOT else ""
        return md_to_rst(path.read_text(encoding="utf-8"), "" if base == "docs" else base,
                         nested=m.group(0).rstrip().endswith(" nested"))

    text = MARKDOWN_MARK.sub(markdown, text)
    text = LANGUAGE_MARK.sub(lambda m: language_rst(), text)
    source[0] = text


def _check_blocks(app, doctree):
    """Every Python block is a doctest (run by tests/docs) or marked as checked there."""
    from docutils import nodes
    from sphinx.util import logging
    log = logging.getLogger(__name__)
    for node in doctree.findall(nodes.literal_block):
        lang = node.get("language", "default")
        if lang in NOT_PYTHON or "gk-checked" in node.get("classes", []):
            continue
        code = node.astext()
        if lang in ("pycon",) or code.lstrip().startswith(">>>"):
            continue
        if lang in ("python", "python3", "py", "default") and "gk." in code or lang in ("python", "py"):
            log.warning("a Python code block that no test runs: write it as a >>> doctest "
                        "(tests/docs runs those)", location=node)


_CODE_SPAN = re.compile(r"(``.+?``|`[^`]+`)")


_STAR_ARGS = re.compile(r"(?<=[(\[,] )\*|(?<=[(\[])\*")


def _plain(text: str) -> str:
    return _STAR_ARGS.sub(r"\\*", text.replace("|", "\\|"))


def _docstring_pipes(app, what, name, obj, options, lines):
    """Docstrings are written for people, Markdown-ish: absolute values as |x| (`|a - n| <= atol`) and
    star-unpacking as `(*shape, *dtype.shape)`, which rST reads as substitutions and emphasis. Escape
    `|` and such `*` outside code spans (gradkit's docstrings use no rST substitutions or tables)."""
    for k, line in enumerate(lines):
        if "|" in line or "*" in line:
            parts = _CODE_SPAN.split(line)
            lines[k] = "".join(p if i % 2 else _plain(p) for i, p in enumerate(parts))


def setup(app):
    app.connect("autodoc-process-docstring", _docstring_pipes)
    app.connect("source-read", _source_read)
    app.connect("doctree-read", _check_blocks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
