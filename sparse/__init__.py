"""`gk.sparse`: block-sparse-row matrices over the kernel language (issue #45), after `warp.sparse`.

- bsr.py: `BsrMatrix` (offsets, columns, values as gk.arrays on any device) and its builds
  (`bsr_from_triplets`, `bsr_zeros`, `bsr_diag`, `bsr_identity`, `bsr_set_from_triplets`, `from_scipy`);
- ops.py: `bsr_mv`, `bsr_mm`, `bsr_transposed`, `bsr_axpy`, `bsr_scale`, `bsr_get_diag` — value work in
  kernels (kernels.py, one set per block size and dtype), structure on the host with NumPy.
"""

from .bsr import (BsrMatrix, bsr_diag, bsr_from_triplets, bsr_identity, bsr_set_from_triplets, bsr_zeros,
                  from_scipy)
from .ops import bsr_axpy, bsr_get_diag, bsr_mm, bsr_mv, bsr_scale, bsr_transposed


def to_scipy(A: BsrMatrix):
    """`A.to_scipy()`: a SciPy BSR (CSR for 1x1 blocks) copy.

    Args:
        A: the `BsrMatrix` to copy to the host."""
    return A.to_scipy()


__all__ = ["BsrMatrix", "bsr_zeros", "bsr_diag", "bsr_identity", "bsr_from_triplets", "bsr_set_from_triplets",
           "bsr_mv", "bsr_mm", "bsr_transposed", "bsr_axpy", "bsr_scale", "bsr_get_diag", "from_scipy",
           "to_scipy"]
