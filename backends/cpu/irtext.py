"""Edits of LLVM IR module text that llvmlite's IR builder cannot express: a declaration swapped for a
definition written as text (native snippets, math functions defined after -O3) or for nothing."""

from __future__ import annotations

import re

from ...core.errors import CompileError


def replace_declarations(text: str, defs: dict[str, str]) -> str:
    """Replace the declaration of each function named in `defs` by its text (one line of `declare` each)."""
    for name, definition in defs.items():
        text, count = re.subn(rf'^declare [^\n]*@"?{re.escape(name)}"?\([^\n]*$', lambda _m: definition, text,
                              flags=re.M)
        if count != 1:
            raise CompileError(f"cpu backend: could not place the definition of '{name}'")
    return text
