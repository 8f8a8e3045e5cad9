"""core/ in layers (issue #38): its module import graph, read from the source with `ast`, has no cycle, only
imports down the layer table below (or sideways where that stays acyclic), and no function imports a gradkit
module lazily, the old way of holding an import circle together.

Only module-level imports count (class bodies included: they run at import time); `if TYPE_CHECKING:`
blocks never run and are left out. Importing `a.b.c` also runs the packages `a.b` and `a`, so those count
as imported too, except the importer's own enclosing packages (already running by then); a name taken
from one's own package (`from . import register`) is an import of it all the same."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORE = ROOT / "core"

# Lowest first; a module may import its own layer or a lower one. A package stands for its submodules.
LAYERS = [
    ("foundation", ("core.types", "core.ops", "core.errors", "core.config", "core.locks", "core.struct")),
    ("builtins", ("core.builtins",)),
    ("verify", ("core.verify",)),
    ("ir, lang", ("core.ir", "core.lang")),
    ("passes, frontend", ("core.passes", "core.frontend")),
    ("func", ("core.func",)),
    ("library, native", ("core.library", "core.native")),
]


def _modules() -> dict[str, pathlib.Path]:
    """{dotted name: file} of every module under core/ (a package is named by its __init__.py)."""
    out = {}
    for path in sorted(CORE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if "__pycache__" in parts:
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _package(module: str) -> str:
    return module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """What an import statement in `module` imports, as dotted names (`gradkit.core.x` written as `core.x`;
    names outside gradkit dropped; gradkit modules outside core/ kept with their `gradkit.` prefix)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        if node.level:
            base = _package(module).split(".")
            base = base[:len(base) - (node.level - 1)]
            stem = ".".join(base + ([node.module] if node.module else []))
        else:
            stem = node.module or ""
        # `from pkg import sub` imports the submodule pkg.sub; `from mod import name` imports mod
        names = [f"{stem}.{a.name}" if _absolute(f"{stem}.{a.name}") in MODULES else stem for a in node.names]
    out = []
    for name in names:
        name = _absolute(name)
        if name in MODULES or name.startswith("gradkit."):
            out.append(name)
    return out


def _absolute(name: str) -> str:
    return name[len("gradkit."):] if name == "gradkit.core" or name.startswith("gradkit.core.") else name


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return isinstance(t, ast.Name) and t.id == "TYPE_CHECKING" or \
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"


def _module_level_imports(body) -> list:
    """Import statements run when the module is imported: not inside functions, nor TYPE_CHECKING blocks."""
    out = []
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        elif isinstance(node, ast.If) and _is_type_checking(node):
            out += _module_level_imports(node.orelse)
        else:
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                out += _module_level_imports(getattr(node, field, None) or [])
    return out


def _function_level_imports(tree: ast.Module) -> list:
    """(function name, import statement) for every import inside a function body (nested ones included)."""
    out = []
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    out.append((getattr(fn, "name", "<lambda>"), node))
    return out


def _parse(module: str) -> ast.Module:
    return ast.parse(MODULES[module].read_text(encoding="utf-8"), str(MODULES[module]))


def _graph() -> dict[str, dict[str, int]]:
    """{module: {imported module: line}}; a submodule import also imports its packages (module docstring)."""
    graph: dict[str, dict[str, int]] = {}
    for module in MODULES:
        edges = graph.setdefault(module, {})
        own = {".".join(module.split(".")[:k]) for k in range(1, module.count(".") + 2)}
        for node in _module_level_imports(_parse(module).body):
            for target in _targets(module, node):
                parts = target.split(".")
                for k in range(1, len(parts)):
                    name = ".".join(parts[:k])
                    if name in MODULES and name not in own:
                        edges.setdefault(name, node.lineno)
                edges.setdefault(target, node.lineno)
    return graph


GRAPH = _graph()


def _where(module: str, line: int) -> str:
    return f"{MODULES[module].relative_to(ROOT)}:{line}"


def _layer(module: str) -> int | None:
    if module == "core":
        return 0
    for k, (_, members) in enumerate(LAYERS):
        if any(module == m or module.startswith(m + ".") for m in members):
            return k
    return None


def test_every_core_module_has_a_layer():
    missing = [m for m in MODULES if _layer(m) is None]
    assert not missing, f"core modules missing from LAYERS in {__file__}: {missing}"


def test_core_imports_nothing_of_gradkit_outside_core():
    out = [f"{_where(m, line)} imports {t}" for m, edges in GRAPH.items() for t, line in edges.items()
           if t not in MODULES]
    assert not out, "core/ imports gradkit modules above it:\n  " + "\n  ".join(out)


def test_core_has_no_import_cycle():
    """Tarjan's strongly connected components: every one must be a single module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in GRAPH[v]:
            if w not in MODULES:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in GRAPH[v]:
                cycles.append(sorted(comp))

    for v in MODULES:
        if v not in index:
            visit(v)
    shown = []
    for comp in cycles:
        edges = [f"{_where(a, line)} -> {b}" for a in comp for b, line in GRAPH[a].items() if b in comp]
        shown.append(", ".join(comp) + ":\n    " + "\n    ".join(edges))
    assert not cycles, "import cycles among core/ modules:\n  " + "\n  ".join(shown)


def test_core_imports_go_down_the_layers():
    out = []
    for m, edges in GRAPH.items():
        for t, line in edges.items():
            if t in MODULES and _layer(t) is not None and _layer(m) is not None and _layer(t) > _layer(m):
                out.append(f"{_where(m, line)}: {m} ({LAYERS[_layer(m)][0]}) imports {t} "
                           f"({LAYERS[_layer(t)][0]})")
    assert not out, "imports up the layers of core/ (lowest first: " + \
        " -> ".join(name for name, _ in LAYERS) + "):\n  " + "\n  ".join(out)


def test_no_function_level_import_of_gradkit_in_core():
    out = []
    for m in MODULES:
        for fn, node in _function_level_imports(_parse(m)):
            if (isinstance(node, ast.ImportFrom) and node.level) or _targets(m, node):
                out.append(f"{_where(m, node.lineno)} (in {fn}): {ast.unparse(node)}")
    assert not out, "imports of gradkit modules inside functions (import them at module level):\n  " + \
        "\n  ".join(out)
