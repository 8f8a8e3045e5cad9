"""What the API reference must document (issue 44 item 3): every parameter of every public function and
class, found in its docstring's ``Args:`` section (Google style, what napoleon renders).

Public means: the names of ``gk.__all__``; the ``__all__`` of the public submodules (``gk.sparse``,
``gk.linalg``, ``gk.viz``), and for ``gk.autograd`` and ``gk.optim``, which have none, the names
API.md gives them; and the user-facing methods of the public classes (METHODS). A class documents its
constructor's parameters in its own docstring or its ``__init__``'s. Kernel-language names (``gk.sin``,
``gk.tid``, ...) are not Python functions: the language table (docs/api/language.rst) gives each a
signature and a line, and `language_undocumented` checks that line exists.

Run as a script, it prints what is missing, grouped by source file.
"""

from __future__ import annotations

import inspect
import re
import sys

import gradkit as gk

SUBMODULES = {"sparse": None, "linalg": None, "viz": None,
              "autograd": ["jacobian", "jacobian_fd", "jacobian_fwd", "jacobian_plot", "gradcheck", "gradcheck_tape"],
              "optim": ["SGD", "Adam"]}
# The methods users call (the rest are the runtime's hooks between its own modules).
METHODS = {
    "array": ["reshape", "view", "assign", "fill_", "zero_", "to", "copy", "numpy", "flatten"],
    "Tape": ["backward", "zero", "reset", "visualize", "save", "record_func", "scope", "record_scope_begin",
             "record_scope_end"],
    "Kernel": ["ir", "source", "grad"],
    "HashGrid": ["reserve", "build"],
    "optim.SGD": ["step"],
    "optim.Adam": ["step"],
}
SECTION = re.compile(r"^(\s*)(Args|Arguments|Parameters|Keyword Args|Keyword Arguments|Other Parameters|"
                     r"Attributes):\s*$")
ENTRY = re.compile(r"^\s+\**([A-Za-z_]\w*(?:\s*,\s*\**[A-Za-z_]\w*)*)\s*(\([^)]*\))?\s*:")


def documented(doc: str | None) -> set[str]:
    """The parameter names an ``Args:`` (or ``Attributes:``) section of `doc` describes, each as
    ``name: text`` or ``name (type): text``; ``a, b: text`` describes both."""
    lines = inspect.cleandoc(doc or "").splitlines()
    names: set[str] = set()
    i = 0
    while i < len(lines):
        m = SECTION.match(lines[i])
        i += 1
        if not m:
            continue
        base = len(m.group(1))
        while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > base):
            entry = ENTRY.match(lines[i])
            if entry and len(lines[i]) - len(lines[i].lstrip()) <= base + 4:
                names.update(n.strip().lstrip("*") for n in entry.group(1).split(","))
            i += 1
    return names


def language_names() -> set[str]:
    from gradkit.core.lang import NAMES
    return set(NAMES)


def public() -> dict[str, object]:
    """Qualified name -> object, for every public function and class."""
    lang = language_names()
    found: dict[str, object] = {}
    for name in gk.__all__:
        obj = getattr(gk, name)
        if name in lang or inspect.ismodule(obj):
            continue
        if inspect.isfunction(obj) or inspect.isclass(obj) or callable(obj):
            found[name] = obj
    for mod, names in SUBMODULES.items():
        module = getattr(gk, mod)
        for name in names if names is not None else module.__all__:
            found[f"{mod}.{name}"] = getattr(module, name)
    for owner, methods in METHODS.items():
        cls = found[owner]
        for m in methods:
            found[f"{owner}.{m}"] = getattr(cls, m)
    return found


def _signature(obj):
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):
        return None


def undocumented() -> dict[str, list[str]]:
    """Qualified name -> its parameters no docstring describes."""
    missing = {}
    for name, obj in public().items():
        sig = _signature(obj)
        if sig is None:
            continue
        docs = documented(getattr(obj, "__doc__", None))
        if inspect.isclass(obj):
            init = obj.__dict__.get("__init__") or getattr(obj, "__init__", None)
            if init is not None and init is not object.__init__:
                docs |= documented(init.__doc__)
            for base in obj.__mro__[1:]:
                if base is not object and "__init__" in base.__dict__ and obj.__init__ is base.__init__:
                    docs |= documented(base.__doc__)
        elif not inspect.isfunction(obj) and not inspect.ismethod(obj) and hasattr(type(obj), "__call__"):
            docs |= documented(type(obj).__call__.__doc__) | documented(type(obj).__doc__)
        params = [p for p in sig.parameters if p not in ("self", "cls")]
        lost = [p for p in params if p not in docs]
        if lost:
            missing[name] = lost
    return missing


def language_undocumented() -> list[str]:
    """Kernel-language names whose entry in the language table would read '(no description)'."""
    from gradkit.core.lang import NAMES
    return sorted(n for n, fn in NAMES.items() if not inspect.cleandoc(fn.__doc__ or "").strip())


def source_file(obj) -> str:
    obj = inspect.unwrap(obj)
    try:
        return inspect.getsourcefile(obj if (inspect.isfunction(obj) or inspect.isclass(obj)) else type(obj)) or "?"
    except TypeError:
        return "?"


if __name__ == "__main__":
    objects = public()
    by_file: dict[str, list[str]] = {}
    for name, params in undocumented().items():
        by_file.setdefault(source_file(objects[name]), []).append(f"{name}: {', '.join(params)}")
    total = 0
    for path in sorted(by_file):
        print(path)
        for line in by_file[path]:
            total += line.count(",") + 1
            print("   ", line)
    print(f"{sum(len(v) for v in undocumented().values())} undocumented parameters in "
          f"{len(undocumented())} of {len(objects)} public objects; language names without a line: "
          f"{language_undocumented()}", file=sys.stderr)
