"""docs/coverage.md lists every construct of the CONSTRUCTS table (a new construct cannot go uncovered
silently: run `make coverage-table`), and the generator renders a results file as documented."""

import pathlib
import re

from gradkit.conformance.lang.constructs import CONSTRUCTS
from .coverage import DOC, render
from gradkit.conformance.lang.harness import MODES

ROW = re.compile(r"^\| [^|]+ \| `([^`]+)` \|(.*)$", re.M)


def _rows(text: str) -> dict[str, list[str]]:
    return {name: [c.strip() for c in rest.split("|")[1:-1]] for name, rest in ROW.findall(text)}


def test_every_construct_is_in_docs_coverage_md():
    rows = _rows(pathlib.Path(DOC).read_text(encoding="utf-8"))
    names = [c.name for c in CONSTRUCTS]
    missing = [n for n in names if n not in rows]
    assert not missing, f"constructs missing from docs/coverage.md (run `make coverage-table`): {missing}"
    stale = sorted(set(rows) - set(names))
    assert not stale, f"docs/coverage.md lists constructs that are no longer in CONSTRUCTS: {stale}"


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
