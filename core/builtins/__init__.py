"""The builtins table: one entry per primitive, with its type rule, NumPy
semantics and derivative declared together.

A scalar primitive declares its *partial derivatives* with the IR builder;
forward mode (JVP: Σ tᵢ·∂f/∂xᵢ) and reverse mode (VJP: adj·∂f/∂xᵢ) both read
them, so a derivative is written once. Primitives on vectors and matrices
declare a `decompose` rule instead: the scalarize pass rewrites them into
scalar primitives, whose derivatives then apply.

An entry also says how it reaches machine code, so no backend re-lists names:
`cmath` names the C99 / OpenCL C math function computing it (the CPU backend
calls libm, the OpenCL backend the built-in of that name), and `expand` writes
it in other primitives (Python's floored `//` and `%`, C's `rem`, clamp, sign), applied by
the expand pass (core/passes/expand.py) after differentiation, so its semantics
live once, in IR. `public` entries are `gk.<name>`; `float_only` ones turn
integer arguments into float32 first (`gk.sqrt(4)`).
"""

from .table import BUILTINS, Builtin, BuiltinTypeError, register  # noqa: F401  (the package's names)
from . import scalar as _scalar  # noqa: F401  (registers entries)
from . import linalg as _linalg  # noqa: F401
from . import bits as _bits  # noqa: F401
from . import remainder as _remainder  # noqa: F401  (C's truncated %, for remainder="truncated" kernels)
from . import stop_gradient as _stop_gradient  # noqa: F401  (stop_gradient, which core/library's code uses)
