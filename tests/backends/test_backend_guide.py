"""backends/README.md, the plugin guide, is checked against the code: its list of primitives is the one the
builtins table generates, its contract changelog has a row per version of `HISTORY`, and every code block it
shows runs (```python blocks executed in order, ```pycon blocks as doctests, in one namespace)."""

from __future__ import annotations

import doctest
import pathlib
import re

import gradkit
from gradkit.backends import CONTRACT_VERSION, registry
from gradkit.backends.capabilities import HISTORY, backend_primitives, everything, primitives_markdown

GUIDE = pathlib.Path(gradkit.__file__).resolve().parent / "backends" / "README.md"


def _text() -> str:
    return GUIDE.read_text()


def test_primitive_list_is_generated_from_the_table():
    text = _text()
    shown = text.split("<!-- BEGIN primitives -->\n", 1)[1].split("\n<!-- END primitives -->", 1)[0]
    assert shown == primitives_markdown(), (
        "backends/README.md's primitive list differs from the builtins table: paste the output of "
        "python -c 'from gradkit.backends.capabilities import primitives_markdown; print(primitives_markdown())' "
        "between its BEGIN/END primitives markers")
    names = re.findall(r"^\| `(\w+)` \|", shown, flags=re.M)
    assert names == backend_primitives()
    # every primitive a backend can see is part of the current contract, so a full plugin declares it
    assert set(names) <= everything().primitives


def test_changelog_has_a_row_per_contract_version():
    rows = re.findall(r"^\| (\d+) \| (\d{4}-\d\d-\d\d) \|", _text(), flags=re.M)
    assert [(int(v), d) for v, d in rows] == [(c.version, c.date) for c in HISTORY]
    assert HISTORY[-1].version == CONTRACT_VERSION


def test_every_code_block_of_the_guide_runs():
    text = _text()
    blocks = re.findall(r"^```(python|pycon)\n(.*?)^```", text, flags=re.M | re.S)
    assert len(blocks) >= 4
    globs: dict = {"__name__": "backend_guide"}
    parser, runner = doctest.DocTestParser(), doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    try:
        for k, (kind, code) in enumerate(blocks):
            if kind == "python":
                exec(compile(code, f"{GUIDE}:block{k}", "exec"), globs)
                continue
            test = parser.get_doctest(code, globs, f"guide block {k}", str(GUIDE), 0)
            result = runner.run(test, clear_globs=False)
            globs.update(test.globs)            # a DocTest runs in a copy: later blocks see its names
            assert result.failed == 0, f"backends/README.md: doctest block {k} failed (output above)"
    finally:
        if "straight" in registry.names():
            registry.unregister("straight")
