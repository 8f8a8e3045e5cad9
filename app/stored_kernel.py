"""Compiling a kernel from the Python source stored in a debug bundle, without executing any of it.

The text is parsed with `ast` (core/frontend SourceInfo.from_text), vetted here, and lowered by gradkit's
frontend from a stand-in function object: its globals hold only the gradkit module under the aliases the
decorator uses (`gk`, `gradkit`, `wp`, ...) and `math`'s constants and functions; annotations are turned into
types by the small interpreter below instead of `eval`. Only gradkit builtins, types, the parameters and the
kernel's own locals may be named: a user @gk.func helper or a module constant is refused by name, and so is
`gk.static(...)` of anything but a literal (the frontend evaluates its argument as Python).
"""

from __future__ import annotations

import ast
import builtins as py_builtins
import inspect
import math
import types

import gradkit

from ..core import types as T
from ..core.errors import CompileError
from ..core.frontend.exprs import PY_ALIASES
from ..core.frontend.source import SourceInfo
from ..core.lang import LangFunction
from ..runtime.launch.kernel import Kernel
from ..viz.bundle import source_sha256


class StoredSourceError(Exception):
    """The stored source cannot be compiled safely (or its hash does not match); the message says why."""


# math's constants and the functions a kernel may call for a builtin (core/frontend/exprs.py PY_ALIASES)
MATH = types.SimpleNamespace(**{n: getattr(math, n) for n in ("pi", "e", "tau", "inf", "nan")},
                             **{f.__name__: f for f in PY_ALIASES if getattr(f, "__module__", None) == "math"})
SAFE_BUILTINS = {"range", "reversed", "float", "int", "bool", "len", "min", "max", "abs", "round"}
TYPE_CALLS = {"array": None, "array1d": 1, "array2d": 2, "array3d": 3, "array4d": 4}
DECORATOR_OPTIONS = {"enable_backward": bool, "max_unroll": int}
FORBIDDEN = (ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.Lambda, ast.ClassDef,
             ast.FunctionDef, ast.AsyncFunctionDef, ast.Await, ast.Yield, ast.YieldFrom, ast.ListComp,
             ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.NamedExpr, ast.With, ast.Try, ast.Delete,
             ast.JoinedStr)


class StoredFunction:
    """What the frontend reads of a Python function, for source text that is never executed: a name, the
    restricted globals, no closure, a signature whose annotations are already types, the parsed source."""

    def __init__(self, src: SourceInfo, namespace: dict, signature: inspect.Signature):
        self.__name__ = self.__qualname__ = src.name
        self.__doc__ = ast.get_docstring(src.tree)
        self.__globals__, self.__closure__, self.__signature__ = namespace, None, signature
        self.__gk_source__ = src

    @property
    def __gk_enclosing__(self) -> dict:
        """No enclosing scope: the Kernel constructor's attempt to record its caller's locals is dropped."""
        return {}

    @__gk_enclosing__.setter
    def __gk_enclosing__(self, value) -> None:
        pass

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"'{self.__name__}' was compiled from stored source; launch it with gk.launch")


def check_hash(name: str, meta: dict, approved: str | None) -> str:
    """The stored source of kernel `name` when its SHA-256 matches the bundle's record and what the user
    approved (`approved`: the hash shown to them); StoredSourceError otherwise."""
    text = meta.get("python_source") or ""
    if not text:
        raise StoredSourceError(f"the bundle does not hold the source of '{name}': nothing to compile")
    recorded = meta.get("source_sha256")
    if not recorded:
        raise StoredSourceError(f"the bundle records no SHA-256 of the source of '{name}' (written by an "
                                "older gradkit): record it again to run gradcheck")
    actual = source_sha256(text)
    if actual != recorded:
        raise StoredSourceError(f"the stored source of '{name}' does not match its recorded SHA-256 "
                                f"({actual[:12]}… vs {recorded[:12]}…): the bundle was changed; "
                                "refusing to compile")
    if approved is None:
        raise StoredSourceError(f"gradcheck compiles the source of '{name}' stored in the bundle: read it "
                                "and confirm \"I have read this source; compile it\" first")
    if approved != actual:
        raise StoredSourceError(f"the source of '{name}' is not the one you approved "
                                f"(SHA-256 {actual[:12]}…, approved {approved[:12]}…)")
    return text


def compile_stored(name: str, meta: dict, approved: str | None, file: str = "<bundle>") -> Kernel:
    """A Kernel built from kernel `name`'s stored source after `check_hash`; `file` is the name its errors
    show. StoredSourceError for anything refused, including the frontend's CompileError."""
    text = check_hash(name, meta, approved)
    try:
        src = SourceInfo.from_text(text, file, meta.get("first_line") or 1, name)
        aliases, options = _decorators(src)
        namespace = {"__builtins__": {}, "math": MATH, **dict.fromkeys(aliases, gradkit)}
        _vet(src, set(aliases))
        signature = _signature(src, namespace)
        kernel = Kernel(StoredFunction(src, namespace, signature), **options)
        kernel.params                         # lower now: compile errors surface here, as messages
    except CompileError as exc:
        raise StoredSourceError(f"cannot compile '{name}' from the bundle: {exc}") from None
    except Exception as exc:              # a frontend failure on odd input is a message, not a traceback
        raise StoredSourceError(f"cannot compile '{name}' from the bundle: "
                                f"{type(exc).__name__}: {exc}") from None
    return kernel


def _decorators(src: SourceInfo) -> tuple[list[str], dict]:
    """The module aliases the decorators name (`@gk.kernel` -> gk) and their literal options."""
    aliases, options = ["gk", "gradkit"], {}
    for dec in src.tree.decorator_list:
        call = dec if isinstance(dec, ast.Call) else None
        target = call.func if call else dec
        if not (isinstance(target, ast.Attribute) and target.attr == "kernel"
                and isinstance(target.value, ast.Name)):
            raise src.error(dec, "only @<module>.kernel decorators can be compiled from a bundle")
        aliases.append(target.value.id)
        if call:
            if call.args:
                raise src.error(call, "the kernel decorator takes keyword options only")
            for kw in call.keywords:
                if kw.arg == "default_fp":           # @gk.kernel(default_fp=gk.float64): a name, not a literal
                    options[kw.arg] = _float_type(src, kw.value, aliases)
                    continue
                kind = DECORATOR_OPTIONS.get(kw.arg)
                value = _literal(kw.value)
                if kind is None or not (isinstance(value, kind) or kw.arg == "max_unroll" and value is None):
                    raise src.error(kw, f"decorator option {kw.arg}= is not one of "
                                        f"{', '.join(DECORATOR_OPTIONS)} with a literal value")
                options[kw.arg] = value
    return aliases, options


def _float_type(src: SourceInfo, node, aliases: list[str]):
    """`<module>.float32` / `<module>.float64` (or the strings) as the gradkit type, without evaluating code."""
    from ..core import types as T
    name = node.attr if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
        and node.value.id in aliases else _literal(node)
    if name not in ("float32", "float64"):
        raise src.error(node, "decorator option default_fp= must be gk.float32 or gk.float64")
    return T.float64 if name == "float64" else T.float32


def _literal(node):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _literal


def _vet(src: SourceInfo, aliases: set) -> None:
    """Refuse what the frontend would evaluate as Python, and name what the bundle does not hold."""
    tree = src.tree
    known = {a.arg for a in tree.args.args} | aliases | {"math"}
    local = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    known |= local
    modules = (aliases | {"math"}) - local - {a.arg for a in tree.args.args}
    for node in ast.walk(ast.Module(body=tree.body, type_ignores=[])):
        if isinstance(node, FORBIDDEN):
            raise src.error(node, f"{type(node).__name__} is not allowed in a kernel compiled from a bundle")
        if isinstance(node, ast.Attribute):
            if node.attr.startswith("_"):
                raise src.error(node, f"attribute '{node.attr}' is not allowed in a kernel compiled from "
                                      "a bundle")
            if isinstance(node.value, ast.Name) and node.value.id in modules:
                _check_module_attr(src, node, aliases)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in known:
            if node.id.startswith("_") or node.id not in SAFE_BUILTINS:
                raise src.error(node, f"'{node.id}' is not defined in the source stored in the bundle "
                                      "(a @gk.func helper or a module-level name?): only gradkit builtins and "
                                      "types can be used when compiling from a bundle")
        elif isinstance(node, ast.Call) and _is_static(node, aliases):
            if len(node.args) != 1 or node.keywords or _literal(node.args[0]) is _literal:
                raise src.error(node, "gk.static() evaluates Python at compile time: compiling from a bundle "
                                      "allows it only on a literal value")


def _check_module_attr(src: SourceInfo, node: ast.Attribute, aliases: set) -> None:
    """`gk.X` / `math.X` must name a gradkit builtin or type (or a math constant/function)."""
    base = node.value.id
    if base == "math":
        if not hasattr(MATH, node.attr):
            raise src.error(node, f"math.{node.attr} is not available when compiling from a bundle")
        return
    if base not in aliases:
        return                                  # a kernel local (e.g. a vector's .x)
    obj = vars(gradkit).get(node.attr)
    if not (isinstance(obj, (LangFunction, T.Type)) or node.attr in TYPE_CALLS
            or node.attr in ("vector", "matrix")):
        raise src.error(node, f"{base}.{node.attr} is not a gradkit builtin or type usable in a kernel "
                              "compiled from a bundle")


def _is_static(node: ast.Call, aliases: set) -> bool:
    f = node.func
    return (isinstance(f, ast.Attribute) and f.attr == "static" and isinstance(f.value, ast.Name)
            and f.value.id in aliases) or (isinstance(f, ast.Name) and f.id == "static")


def _signature(src: SourceInfo, namespace: dict) -> inspect.Signature:
    """The kernel's signature with each annotation turned into a gradkit type by `_annotation`."""
    params = []
    for arg in src.tree.args.args:
        if arg.annotation is None:
            raise src.error(arg, f"parameter '{arg.arg}' needs a type annotation")
        params.append(inspect.Parameter(arg.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                        annotation=_annotation(src, arg.annotation, namespace)))
    return inspect.Signature(params)


def _annotation(src: SourceInfo, node: ast.AST, ns: dict):
    """A parameter annotation as a type, interpreting only names, gk.<type>, gk.array(dtype=, ndim=),
    gk.arrayNd(dtype), gk.vector(length, dtype) and gk.matrix(shape, dtype) with literal arguments."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            raise src.error(node, f"annotation {node.value!r} does not parse") from None
    try:
        if isinstance(node, ast.Call):
            return _type_call(src, node, ns)
        return T.as_type(_type_name(src, node, ns))
    except (TypeError, ValueError) as exc:
        raise src.error(node, f"bad annotation: {exc}") from None


def _type_name(src: SourceInfo, node: ast.AST, ns: dict):
    if isinstance(node, ast.Name) and node.id in ("float", "int", "bool"):
        return getattr(py_builtins, node.id)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
            and ns.get(node.value.id) is gradkit:
        obj = vars(gradkit).get(node.attr)
        if isinstance(obj, T.Type):
            return obj
    raise src.error(node, "annotations compiled from a bundle may name float, int, bool or a gradkit type")


def _type_call(src: SourceInfo, node: ast.Call, ns: dict):
    f = node.func
    if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and ns.get(f.value.id) is gradkit
            and (f.attr in TYPE_CALLS or f.attr in ("vector", "matrix"))):
        raise src.error(node, "annotations compiled from a bundle may call only gk.array, gk.array1d..4d, "
                              "gk.vector and gk.matrix")
    kw = {k.arg: k.value for k in node.keywords}
    if None in kw:
        raise src.error(node, "star-arguments are not allowed in annotations")
    if f.attr in TYPE_CALLS:
        names = ("dtype",) if TYPE_CALLS[f.attr] else ("data", "dtype")
        args = dict(zip(names, node.args))
        if len(node.args) > len(names) or set(kw) - {"dtype", "ndim"} or ("data" in args and "dtype" in kw):
            raise src.error(node, f"gk.{f.attr}() in an annotation takes dtype= and ndim= only")
        dtype_node = kw.get("dtype", args.get("dtype", args.get("data")))
        dtype = _type_name(src, dtype_node, ns) if dtype_node is not None else T.float32
        ndim = TYPE_CALLS[f.attr] or (_literal(kw["ndim"]) if "ndim" in kw else 1)
        return T.array_type(T.as_type(dtype), ndim)
    first = "length" if f.attr == "vector" else "shape"
    args = dict(zip((first, "dtype"), node.args))
    args.update(kw)
    if len(node.args) > 2 or set(args) - {first, "dtype"} or first not in args:
        raise src.error(node, f"gk.{f.attr}({first}, dtype=None) in an annotation")
    size = _literal(args[first])
    dtype = _type_name(src, args["dtype"], ns) if "dtype" in args else None
    return (T.vector if f.attr == "vector" else T.matrix)(size, dtype)
