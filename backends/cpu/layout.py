"""The packed argument block of a CPU kernel (what codegen.py reads and packing.py writes) and the names of
its entry points: light enough to import without llvmlite's IR builder, so a warm start that only loads
cached object code never imports the code generator."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...backends.analysis import scatter_arrays as _scatter_arrays
from ...core.ir import Function

HEADER = 5            # slots: dims[4], fault pointer
ALL = "_all"          # suffix of the whole-grid entry point (see Codegen.whole_grid_entry)
LOCAL = "_local"      # suffix of the entry whose shifted scatter-adds are plain adds (see Codegen.build)


@dataclass
class Layout:
    """Where each parameter lives in the packed argument block."""

    slots: list = field(default_factory=list)   # per param: (offset, "array"|"scalar", type)
    private: dict = field(default_factory=dict)  # param index -> slot of its per-worker scatter buffer
    size: int = HEADER


def layout_of(fn: Function) -> Layout:
    lay = Layout()
    for p in fn.params:
        if p.type.is_array:
            lay.slots.append((lay.size, "array", p.type))
            lay.size += 1 + p.type.ndim
        else:
            lay.slots.append((lay.size, "scalar", p.type))
            lay.size += 1
    for k in sorted(_scatter_arrays(fn)):
        lay.private[k] = lay.size
        lay.size += 1
    return lay
