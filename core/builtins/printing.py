"""The kernel print op: what `print(...)`, Warp's `wp.printf` / `expect_eq` / `expect_near` and Taichi's
`print` lower to, and how each backend language spells it.

A print is one `native` IR instruction whose `native` attribute is a `PrintSpec` (a format of literal text and
conversions, and the scalar types of its operands): `native` is already the IR's opaque effect, which every
pass keeps in order, never merges or removes. The spec answers the `NativeSpec` protocol (core/native.py) so
the passes need no new case: its replay and adjoint variants have no code, so the adjoint kernel prints
nothing and no gradient flows through a print. Backends ask for the format in their language
(`c_format`, `py_format`) and emit one `printf` (or Python write) per call, so a line is never split between
threads; the order of lines from different threads is not defined.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from .. import types as T
from ..errors import CompileError

# C conversions a kernel format may use: integer and float ones ('a'/'A', 's' of a value, 'p' and 'n' have no
# meaning for kernel values); `b` is gradkit's own: a bool as Python's True / False.
INT_CONVERSIONS = frozenset("diouxXc")
FLOAT_CONVERSIONS = frozenset("fFeEgG")
_SPEC = re.compile(r"%(?P<flags>[-+ #0]*)(?P<width>\d*)(?P<prec>(?:\.\d*)?)(?P<length>hh|h|ll|l|j|z|t|L)?"
                   r"(?P<conv>.)?", re.S)


@dataclass(frozen=True)
class Conv:
    """One conversion: `%<flags><conv>` of operand `arg` (flags: flags, width and precision)."""

    flags: str
    conv: str
    arg: int


class FormatError(ValueError):
    """A format the kernel language cannot print; the frontend reports it at the call."""


def parse_c_format(fmt: str, args: list) -> list:
    """Pieces (str literal or Conv) of a C format string over `args`, each a T.ScalarType or a Python str
    (a literal argument, printed by `%s`). Length modifiers are dropped: each backend writes the one its
    operand's type needs. FormatError for a conversion the operands do not match."""
    pieces: list = []
    pos, k = 0, 0
    for m in _SPEC.finditer(fmt):
        if m.start() > pos:
            pieces.append(fmt[pos:m.start()])
        pos = m.end()
        conv = m.group("conv")
        if conv == "%" and not (m.group("flags") or m.group("width") or m.group("prec") or m.group("length")):
            pieces.append("%")
            continue
        if conv is None:
            raise FormatError(f"the format ends in a lone '%' (write '%%' for a percent sign): {fmt!r}")
        spec = m.group(0)
        if "*" in fmt[m.start():m.end()]:
            raise FormatError(f"'{spec}': a width or precision given by an argument ('*') is not supported")
        if k >= len(args):
            raise FormatError(f"the format {fmt!r} has more conversions than the {len(args)} argument"
                              f"{'s' * (len(args) != 1)} given")
        arg = args[k]
        flags = m.group("flags") + m.group("width") + m.group("prec")
        if conv == "s":
            if not isinstance(arg, str):
                raise FormatError(f"'{spec}' (argument {k + 1}) prints a string literal, got a {arg.name} value")
            pieces.append(arg if not flags else ("%" + flags + "s") % arg)
        elif isinstance(arg, str):
            raise FormatError(f"'{spec}' (argument {k + 1}) is given the string {arg!r}; use %s")
        elif conv in INT_CONVERSIONS:
            if arg.is_float:
                raise FormatError(f"'{spec}' (argument {k + 1}) needs an integer, got {arg.name}; use %f / %g "
                                  f"or cast it, e.g. int(x)")
            pieces.append(Conv(flags, conv, k))
        elif conv in FLOAT_CONVERSIONS:
            if not arg.is_float:
                raise FormatError(f"'{spec}' (argument {k + 1}) needs a float, got {arg.name}; use %d or cast "
                                  f"it, e.g. float(x)")
            pieces.append(Conv(flags, conv, k))
        else:
            raise FormatError(f"{spec!r}: unsupported conversion {conv!r} (kernels print with "
                              f"d i u o x X c, f F e E g G, and %s of a string literal)")
        k += 1
    if pos < len(fmt):
        pieces.append(fmt[pos:])
    if k != len(args):
        raise FormatError(f"the format {fmt!r} has {k} conversion{'s' * (k != 1)} but {len(args)} argument"
                          f"{'s' * (len(args) != 1)} were given")
    return pieces


def merge(pieces: list) -> tuple:
    """Adjacent literals joined, empty ones dropped."""
    out: list = []
    for p in pieces:
        if isinstance(p, str):
            if not p:
                continue
            if out and isinstance(out[-1], str):
                out[-1] += p
                continue
        out.append(p)
    return tuple(out)


def _c_literal(text: str) -> str:
    """`text` inside a C string literal, `%` doubled for printf (UTF-8 bytes past ASCII as octal escapes)."""
    out = []
    for byte in text.replace("%", "%%").encode("utf-8"):
        ch = chr(byte)
        if ch == "\\" or ch == '"':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif 32 <= byte < 127 and ch != "?":
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    return "".join(out)


@dataclass(eq=False)
class PrintSpec:
    """One print call: its pieces and operand types, answering NativeSpec's protocol (core/native.py).

    Args:
        pieces: str literals and Conv conversions, in order.
        types: the scalar type of each operand (the instruction's arguments, in order).
        what: the source-level name ("print", "printf", "expect_eq", ...), for messages and the IR text.
    """

    pieces: tuple
    types: tuple
    what: str = "print"

    def __post_init__(self) -> None:
        self.name = self.what
        self.params = [(f"p{k}", t) for k, t in enumerate(self.types)]
        self.ret_type = None
        self.adj_snippets = {}
        self.replay_snippets = None

    def __repr__(self) -> str:
        text = "".join(p if isinstance(p, str) else f"%{p.flags}{p.conv}" for p in self.pieces)
        types = ",".join(t.name for t in self.types)
        digest = hashlib.sha256(repr((self.pieces, types)).encode()).hexdigest()[:8]
        return f"{self.what}({text!r}; {types})#{digest}"

    # ---------------------------------------------------------------- NativeSpec's protocol
    def has(self, variant: str) -> bool:
        return True

    def snippet(self, backend: str, variant: str) -> str:
        """The code of a C-style backend ('c', 'opencl'); '' for the replay and the adjoint (nothing is
        printed there) and for backends that lower a print themselves ('cpu', 'numpy')."""
        if backend in ("cpu", "numpy"):
            return ""
        if backend not in ("c", "opencl"):
            raise CompileError(f"the '{backend}' backend has no lowering of {self.what}() in kernels "
                               f"(gradkit prints on cpu, c, numpy and opencl)")
        # the comment names the spec: backends name a snippet's function by its text's digest
        tag = f"    /* {repr(self).replace('*/', '* /')} */\n"
        return tag + (self.c_body(backend) if variant == "forward" else "")

    def float_scalars(self) -> list[int]:
        return []          # no adjoint: a print contributes no gradient

    def float_arrays(self) -> list[int]:
        return []

    # ---------------------------------------------------------------- formats per language
    def bool_args(self) -> list[int]:
        """Operands printed as True / False (`b` conversions), each once."""
        return list(dict.fromkeys(p.arg for p in self.pieces if isinstance(p, Conv) and p.conv == "b"))

    def c_format(self, lang: str, bools: dict | None = None) -> tuple[str, list[int]]:
        """(format as C string literal text, operand indices it reads) for C ('c', also the host printf the
        cpu backend calls) or OpenCL C ('opencl': 64-bit integers are `long`, %ld). `bools`: {operand:
        value} writes those bools as literal text; without it a `b` conversion is `%s` of a string."""
        text, used = [], []
        for p in self.pieces:
            if isinstance(p, str):
                text.append(_c_literal(p))
                continue
            t = self.types[p.arg]
            if p.conv == "b":
                if bools is not None:
                    text.append("True" if bools[p.arg] else "False")
                else:
                    text.append("%s")
                    used.append(p.arg)
                continue
            length = ""
            if t.is_int and t.bits == 64:
                length = "l" if lang == "opencl" else "ll"
            text.append(f"%{p.flags}{length}{p.conv}")
            used.append(p.arg)
        return "".join(text), used

    def c_body(self, lang: str) -> str:
        """A C / OpenCL C function body printing the parameters p0, p1, ... (one printf per call; a bool's
        True / False chosen by branches, since OpenCL's %s takes only literal strings)."""
        bools = self.bool_args()

        def call(values: dict) -> str:
            fmt, used = self.c_format(lang, values)
            args = "".join(f", {self._c_arg(k, lang)}" for k in used)
            tail = " fflush(stdout);" if lang == "c" else ""
            return f'printf("{fmt}"{args});{tail}'

        def branch(k: int, values: dict, pad: str) -> str:
            if k == len(bools):
                return f"{pad}{call(values)}\n"
            p = f"p{bools[k]}"
            return (f"{pad}if ({p}) {{\n{branch(k + 1, {**values, bools[k]: True}, pad + '    ')}{pad}}} else {{\n"
                    f"{branch(k + 1, {**values, bools[k]: False}, pad + '    ')}{pad}}}\n")
        return branch(0, {}, "    ")

    def _c_arg(self, k: int, lang: str) -> str:
        t = self.types[k]
        if t.is_bool:
            return f"(int)p{k}"
        return f"p{k}"

    def py_format(self, values: list) -> str:
        """The printed text for one thread given its operand values (the numpy backend; C's printf
        semantics: floats as doubles, unsigned conversions of negative integers wrap)."""
        out = []
        for p in self.pieces:
            if isinstance(p, str):
                out.append(p)
                continue
            v, t = values[p.arg], self.types[p.arg]
            if p.conv == "b":
                out.append("True" if bool(v) else "False")
            elif p.conv in FLOAT_CONVERSIONS:
                out.append(f"%{p.flags}{p.conv}" % float(v))
            else:
                iv = int(v)
                if p.conv in "ouxX" and iv < 0:
                    iv &= (1 << (t.bits if not t.is_bool else 32)) - 1
                conv = "d" if p.conv in "iu" else p.conv
                out.append(f"%{p.flags}{conv}" % iv)
        return "".join(out)


def value_pieces(t: T.Type, start: int) -> tuple[list, list]:
    """Pieces printing one value of type `t` (Python's print: ints %d, uint32 %u, floats %g, bools
    True / False, vectors [a, b, c], matrices [[a, b], [c, d]]) and the scalar types of its operands, which
    are numbered from `start` (components in row-major order)."""
    s = t.scalar

    def one(k: int) -> Conv:
        conv = "b" if s.is_bool else "g" if s.is_float else "u" if s is T.uint32 else "d"
        return Conv("", conv, k)
    if t.is_scalar:
        return [one(start)], [s]
    if t.is_vector:
        n = t.length
        pieces: list = ["["]
        for k in range(n):
            pieces += [one(start + k)] + ([", "] if k + 1 < n else [])
        return pieces + ["]"], [s] * n
    rows, cols = t.shape
    pieces = ["["]
    for r in range(rows):
        pieces.append("[")
        for c in range(cols):
            pieces += [one(start + r * cols + c)] + ([", "] if c + 1 < cols else [])
        pieces.append("]" + (", " if r + 1 < rows else ""))
    return pieces + ["]"], [s] * (rows * cols)
