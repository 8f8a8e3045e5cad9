"""Find and run the code of the documentation: every `>>>` example of the Sphinx pages (docs/**/*.rst),
of the Markdown pages the site renders (docs/*.md, backends/README.md, CHANGELOG.md) and of the
docstrings the API reference shows; and every other Python block of those Markdown pages, which either
runs as a script or, marked ```` ```python excerpt=PATH ````, must be found verbatim in PATH.

Run as a script (`python snippets.py PAGE`) it runs one page's examples in this fresh process, as
doctest does (each page its own namespace, examples in order), and prints the failures; the tests run
each page so, in a process of its own, so no setting a page changes leaks into the test session.
"""

from __future__ import annotations

import doctest
import importlib
import pathlib
import re
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "_ext"))
import gradkit_docs  # noqa: E402  (the converter the site renders Markdown pages with)

FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
PARSER = doctest.DocTestParser()

# Modules whose docstrings the API reference renders (docs/api/*.rst); their `>>>` examples run too.
DOCSTRING_MODULES = [
    "gradkit", "gradkit.core.config", "gradkit.core.errors", "gradkit.core.types", "gradkit.core.func",
    "gradkit.core.struct", "gradkit.core.native", "gradkit.core.lang", "gradkit.runtime.arrays.array",
    "gradkit.runtime.arrays.creation", "gradkit.runtime.arrays.host_ops", "gradkit.runtime.launch.device", "gradkit.runtime.launch.kernel",
    "gradkit.runtime.launch.launch", "gradkit.runtime.tape.tape", "gradkit.runtime.tape.forward_mode", "gradkit.runtime.tape.checkpoint",
    "gradkit.runtime.arrays.interop", "gradkit.runtime.tools.autograd", "gradkit.runtime.tools.optim", "gradkit.ad.transforms",
    "gradkit.backends", "gradkit.backends.base", "gradkit.viz", "gradkit.viz.tape_graph",
    "gradkit.viz.kernel_graph", "gradkit.viz.bundle", "gradkit.viz.capture",
]


def rst_pages() -> list[pathlib.Path]:
    return sorted(p for p in DOCS.rglob("*.rst") if not {"_build", "_ext"} & set(p.relative_to(DOCS).parts))


def markdown_pages() -> list[pathlib.Path]:
    """The Markdown files the site renders (each named by a `.. gradkit-markdown:` line of a page)."""
    found = []
    for page in rst_pages():
        for m in gradkit_docs.MARKDOWN_MARK.finditer(page.read_text(encoding="utf-8")):
            found.append((page.parent / m.group(1)).resolve())
    return sorted(set(found))


def page_id(path: pathlib.Path) -> str:
    return str(path.relative_to(ROOT))


def examples(path: pathlib.Path) -> list[doctest.Example]:
    """The `>>>` examples of a page (for Markdown: of its ```python fences)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".md":
        text = "\n\n".join(code for lang, _, code, _ in gradkit_docs.python_fences(text)
                           if lang == "python" and ">>>" in code)
    return PARSER.get_examples(text, name=page_id(path))


def scripts(path: pathlib.Path) -> list[tuple[str, str, int]]:
    """A Markdown page's Python blocks that are not doctests: (info string, code, line)."""
    if path.suffix != ".md":
        return []
    return [(info, code, line) for lang, info, code, line in gradkit_docs.python_fences(path.read_text("utf-8"))
            if lang == "python" and ">>>" not in code]


def docstring_tests() -> list[doctest.DocTest]:
    finder = doctest.DocTestFinder(exclude_empty=True)
    tests = []
    for name in DOCSTRING_MODULES:
        module = importlib.import_module(name)
        tests.extend(t for t in finder.find(module, name) if t.examples)
    return tests


def _excerpt_missing(info: str, code: str) -> str | None:
    """For ```python excerpt=PATH: the first line of `code` (comments aside) not found in PATH."""
    target = ROOT / re.search(r"excerpt=(\S+)", info).group(1)
    source = {" ".join(line.split()) for line in target.read_text(encoding="utf-8").splitlines()}
    for line in code.splitlines():
        stripped = line.split("  #")[0].strip()
        if stripped and not stripped.startswith("#") and " ".join(stripped.split()) not in source:
            return line
    return None


def run_page(path: pathlib.Path) -> tuple[int, int, str]:
    """Run one page here: (examples and scripts run, failures, report)."""
    import gradkit as gk
    gk.set_device("cpu")
    out: list[str] = []
    globs = {"__name__": "__docs__"}
    test = doctest.DocTest(examples(path), globs, page_id(path), str(path), 0, None)
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    runner.run(test, out=out.append)
    failed, ran = runner.failures, len(test.examples)
    for info, code, line in scripts(path):
        ran += 1
        if "excerpt=" in info:
            missing = _excerpt_missing(info, code)
            if missing is not None:
                failed += 1
                out.append(f"{page_id(path)}:{line}: excerpt line not found in its source: {missing!r}\n")
            continue
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
            fh.write("import numpy as np\nimport gradkit as gk\n" + code)
        try:
            exec(compile(pathlib.Path(fh.name).read_text(), fh.name, "exec"), {"__name__": "__docs__"})
        except Exception as exc:  # noqa: BLE001  (reported as the block's failure)
            failed += 1
            out.append(f"{page_id(path)}:{line}: the Python block raised {type(exc).__name__}: {exc}\n")
        finally:
            pathlib.Path(fh.name).unlink()
    return ran, failed, "".join(out)


def run_docstrings() -> tuple[int, int, str]:
    import gradkit as gk
    gk.set_device("cpu")
    out: list[str] = []
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    ran = 0
    for test in docstring_tests():
        ran += len(test.examples)
        runner.run(test, out=out.append)
    return ran, runner.failures, "".join(out)


if __name__ == "__main__":
    target = sys.argv[1]
    ran, failed, report = run_docstrings() if target == "--docstrings" else run_page(ROOT / target)
    sys.stdout.write(report)
    print(f"ran {ran}, failed {failed}")
    sys.exit(1 if failed else 0)
