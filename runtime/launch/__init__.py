"""Kernels and launches: the kernel object, argument binding, variant choice, bounds proofs, devices, the kernel cache and NaN checks."""
