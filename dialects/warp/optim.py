"""`warp.optim`: Warp's optimisers with Warp's signatures (`Adam(params, lr=...)`, `opt.step(grads)`),
which are gradkit's own (they step parameters with kernels on their device)."""

from __future__ import annotations

from ..runtime.tools.optim import SGD, Adam

__all__ = ["Adam", "SGD"]
