"""docs/coverage.md lists every construct of the CONSTRUCTS table (a new construct cannot go uncovered
silently: run `make coverage-table`), and the generator renders a results file as documented."""

import pathlib
import re

from gradkit.conformance.lang.constructs import CONSTRUCTS
import pytest

from .coverage import DOC, _patterns, render, render_tape, tape_cells_from_junit
from gradkit.conformance.lang.harness import MODES

ROW = re.compile(r"^\| [^|]+ \| `([^`]+)` \|(.*)$", re.M)


def _rows(text: str, section: str = "language") -> dict[str, list[str]]:
    """Rows of the language table, or (section="tape") of the tape-patterns family after it."""
    lang, _, tape = text.partition("\n## Tape patterns\n")
    return {name: [c.strip() for c in rest.split("|")[1:-1]]
            for name, rest in ROW.findall(tape if section == "tape" else lang)}


def test_every_construct_is_in_docs_coverage_md():
    rows = _rows(pathlib.Path(DOC).read_text(encoding="utf-8"))
    names = [c.name for c in CONSTRUCTS]
    missing = [n for n in names if n not in rows]
    assert not missing, f"constructs missing from docs/coverage.md (run `make coverage-table`): {missing}"
    stale = sorted(set(rows) - set(names))
    assert not stale, f"docs/coverage.md lists constructs that are no longer in CONSTRUCTS: {stale}"


def test_every_tape_pattern_is_in_docs_coverage_md():
    text = pathlib.Path(DOC).read_text(encoding="utf-8")
    if "\n## Tape patterns\n" not in text:
        pytest.skip("docs/coverage.md predates the tape-patterns family (run `make coverage-table`)")
    rows = _rows(text, "tape")
    names = [name for name, _ in _patterns()]
    missing = [n for n in names if n not in rows]
    assert not missing, f"tape patterns missing from docs/coverage.md (run `make coverage-table`): {missing}"
    stale = sorted(set(rows) - set(names))
    assert not stale, f"docs/coverage.md lists tape patterns that are no longer in PATTERNS: {stale}"


def test_render_marks_each_cell():
    case = next(c for c in CONSTRUCTS if not c.diff)
    other = next(c for c in CONSTRUCTS if c.diff)
    cells = {f"{other.name}|forward|cpu": "passed", f"{other.name}|reverse|cpu": "failed",
             f"{case.name}|forward|cpu": "passed"}
    text = render({"date": "2000-01-01", "devices": {"cpu": "the cpu"}, "cells": cells}, "abc123")
    rows = _rows(text)
    assert rows[other.name][-len(MODES):] == ["✓", "✗", "–"]
    assert rows[case.name][-len(MODES):] == ["✓", "n/a", "n/a"]
    assert set(rows) == {c.name for c in CONSTRUCTS}
    assert "2000-01-01" in text and "`cpu`: the cpu" in text
    assert f"Constructs with a failing cell: `{other.name}`" in text


def test_render_tape_patterns_family(tmp_path):
    """The tape-patterns family: pattern x reverse / forward-over-reverse x device, read from JUnit XML."""
    xml = tmp_path / "r.xml"
    xml.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="test_tape_patterns" name="test_tape_pattern[a_pat-reverse-cpu]"/>'
        '<testcase classname="test_tape_patterns" name="test_tape_pattern[a_pat-forward-over-reverse-cpu]">'
        '<failure message="x"/></testcase>'
        '<testcase classname="test_tape_patterns" name="test_tape_pattern[b_pat-reverse-opencl:0]">'
        '<properties><property name="tape_cell" value="b_pat|reverse|opencl:0|refused"/></properties>'
        '</testcase></testsuite></testsuites>', encoding="utf-8")
    cells = tape_cells_from_junit(str(xml))
    assert cells == {"a_pat|reverse|cpu": "passed", "a_pat|forward-over-reverse|cpu": "failed",
                     "b_pat|reverse|opencl:0": "refused"}
    results = {"date": "2000-01-01", "devices": {"cpu": "the cpu", "opencl:0": "pocl"}, "cells": {},
               "tape_cells": cells}
    text = "\n".join(render_tape(results, [("a_pat", "first"), ("b_pat", "second | more")]))
    rows = _rows("\n## Tape patterns\n" + text, "tape")
    assert rows["a_pat"][-4:] == ["✓", "✗", "–", "–"]
    assert rows["b_pat"][-4:] == ["–", "–", "refused", "–"]
    assert "| `b_pat` | second \\| more |" in text
    assert "2 of 8 cells pass (1 of them by refusing" in text
    assert "Patterns with a failing cell: `a_pat`" in text
    assert render_tape({"devices": {}, "cells": {}}) == []
