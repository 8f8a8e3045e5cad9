"""`NumpyBackend`: the gradkit backend plugin interface, implemented on host NumPy memory.

Memory is plain NumPy `uint8` arrays (so gradkit arrays on this device are zero-copy host
views); "compiling" checks the lowered IR and plans it; a launch interprets it (interpreter.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradkit.backends import CONTRACT_VERSION
from gradkit.backends.base import Backend, CompileOptions, DeviceInfo, fault_error
from gradkit.core.builtins import BUILTINS
from gradkit.core.errors import CompileError
from gradkit.core.ir import Function, IRError, verify
from gradkit.core.ops import MEMORY, Op

from .interpreter import OPS, Plan, Run

DEVICE = DeviceInfo("numpy", "NumPy reference interpreter (float64-capable)",
                    properties={"fp64": True, "host_memory": True})


@dataclass
class CompiledKernel:
    """What `compile` hands back to `launch`: the lowered IR itself, its plan and the options."""

    fn: Function
    plan: Plan
    options: CompileOptions
    device: DeviceInfo


class NumpyBackend(Backend):
    """A reference interpreter of lowered IR, vectorised over threads with NumPy. One device, "numpy"."""

    name = "numpy"
    contract_version = CONTRACT_VERSION     # the reference: the whole contract as it stands
    # The reference evaluates every primitive by the builtins table's own NumPy semantics, the expandable
    # ones (floored // and %, clamp, sign, abs) included: the fuzz oracle then checks their expansions.
    native_prims = frozenset(name for name, entry in BUILTINS.items() if entry.expand is not None)

    def devices(self) -> list[DeviceInfo]:
        return [DEVICE]

    # Memory: host NumPy uint8 buffers --------------------------------------------------
    def alloc(self, device: DeviceInfo, nbytes: int) -> np.ndarray:
        return np.zeros(int(nbytes), dtype=np.uint8)

    def copy_from_host(self, device: DeviceInfo, dst: np.ndarray, src: np.ndarray) -> None:
        raw = np.ascontiguousarray(src).reshape(-1).view(np.uint8)
        dst[:raw.nbytes] = raw

    def copy_to_host(self, device: DeviceInfo, src: np.ndarray, dst: np.ndarray) -> None:
        if not dst.flags.c_contiguous:
            raise ValueError("copy_to_host needs a C-contiguous destination")
        dst.reshape(-1).view(np.uint8)[:] = src[:dst.nbytes]

    def copy(self, device: DeviceInfo, dst: np.ndarray, src: np.ndarray, nbytes: int) -> None:
        dst[:nbytes] = src[:nbytes]

    def fill_zero(self, device: DeviceInfo, buf: np.ndarray, nbytes: int) -> None:
        buf[:nbytes] = 0

    def host_view(self, device: DeviceInfo, buf: np.ndarray) -> np.ndarray:
        return buf

    # Code: nothing to generate; the lowered IR is the program -----------------------------
    def compile(self, device: DeviceInfo, fn: Function, options: CompileOptions) -> CompiledKernel:
        """Check that `fn` is lowered IR this interpreter can run, and plan it."""
        try:
            verify(fn, scalar_only=True)
        except IRError as exc:
            raise CompileError(f"numpy backend: kernel '{fn.name}' is not valid lowered IR: {exc}") from exc
        for ins in fn.walk():
            if ins.op not in OPS:
                raise CompileError(f"numpy backend: kernel '{fn.name}': op '{ins.op}' is not part of lowered "
                                   f"IR (expected one of {', '.join(sorted(OPS))})")
            if ins.op == Op.PRIM and getattr(BUILTINS.get(ins.attrs["name"]), "eval", None) is None:
                raise CompileError(f"numpy backend: kernel '{fn.name}': primitive '{ins.attrs['name']}' "
                                   "has no NumPy semantics in the builtins table")
            if ins.op in MEMORY and ins.attrs.get("comp") is None:
                raise CompileError(f"numpy backend: kernel '{fn.name}': {ins.op} without a component index "
                                   "(the scalarize pass did not run)")
        return CompiledKernel(fn, Plan(fn), options, device)

    def launch(self, compiled: CompiledKernel, dim: tuple[int, ...], args: list) -> None:
        """Interpret the kernel for every thread of `dim`; raise the first recorded fault afterwards."""
        run = Run(compiled.fn, compiled.plan, compiled.options, dim, args)
        run.execute()
        if run.faults.first is not None:
            raise fault_error(compiled.fn, run.faults.first, compiled.options)

    def synchronize(self, device: DeviceInfo) -> None:
        """Launches run to completion before returning: nothing to wait for."""

    def source(self, compiled: CompiledKernel) -> str:
        return str(compiled.fn)

    def conformance_snippets(self) -> dict:
        """The conformance suite's reference native functions as NumPy snippets (native.py's convention)."""
        return {
            "scaled_square": {"forward": "return a * x * x", "replay": "return (a * x) * x",
                              "adjoint": "adj_a += x * x * adj_ret\nadj_x += 2 * a * x * adj_ret"},
            "scale_into": {"forward": "out[i] = a * x[i]", "replay": "out[i] = a * x[i]",
                           "adjoint": "adj_a += x[i] * adj_out[i]\nnp.add.at(adj_x, i, a * adj_out[i])"},
        }
