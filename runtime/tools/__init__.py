"""Tools over kernels and tapes: Jacobians and gradient checks, optimisers."""
