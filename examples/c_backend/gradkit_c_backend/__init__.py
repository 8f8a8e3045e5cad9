"""gradkit-c-backend: gradkit kernels as C, built by the system C compiler and run on the host (OpenMP).

Registered under the entry-point group ``gradkit.backends`` as ``c``, so after ``pip install`` its device
is ``"c"``: ``gk.launch(k, n, ..., device="c")``. It shows how a C-like backend reuses gradkit's C-style
emitter (``gradkit.backends.cstyle``): language.py overrides only the C spelling.
"""

from .backend import CBackend, CompiledC

__all__ = ["CBackend", "CompiledC"]
