"""The one check of a kernel-source error: `gk.kernel(fn).ir()` raises a gk.CompileError whose text matches
`message` and points at `snippet`'s line (and column) of fn's source, with that line and a caret under
the snippet shown."""

from __future__ import annotations

import inspect
import re

import pytest

import gradkit as gk


def assert_compile_error(fn, snippet: str, message: str, column: bool = True, caret: bool = False) -> str:
    """Checks as above; `column=False` for an error reported inside a callee (its text names the call
    site as `file:line`); `caret=True` also checks the caret sits under the snippet. Returns the text."""
    with pytest.raises(gk.CompileError) as info:
        gk.kernel(fn).ir()
    text = str(info.value)
    assert re.search(message, text), text
    lines, first = inspect.getsourcelines(fn)
    row = next(k for k, line in enumerate(lines) if snippet in line)
    col = lines[row].index(snippet)
    where = f"{inspect.getsourcefile(fn)}:{first + row}"
    assert (f"{where}:{col + 1}:" if column else where) in text, text
    if caret:
        src, mark = text.splitlines()[1:3]
        assert src.strip() == lines[row].strip(), text
        indent = len(lines[row]) - len(lines[row].lstrip())
        assert mark.index("^") - mark.index("    ") - 4 == col - indent, text
    return text
