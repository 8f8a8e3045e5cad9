"""gradkit-numpy-backend: a NumPy reference interpreter of gradkit's lowered IR, as a backend plugin.

Registered under the entry-point group ``gradkit.backends`` as ``numpy``, so after
``pip install`` its device is ``"numpy"``: ``gk.launch(k, n, ..., device="numpy")``.
"""

from .backend import CompiledKernel, NumpyBackend

__all__ = ["NumpyBackend", "CompiledKernel"]
