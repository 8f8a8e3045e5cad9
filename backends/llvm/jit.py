"""LLVM plumbing: the host target machine, the -O3 pipeline, object emission and loading.

Every kernel takes one path to machine code, cached or not: LLVM IR text → optimised module →
object code (`emit_object`) → an MCJIT engine that loads the object. A disk-cache hit skips the
first two steps and loads the stored object directly.
"""

from __future__ import annotations

import hashlib
import threading
import warnings
from dataclasses import dataclass

import llvmlite
import llvmlite.binding as llvm

_lock = threading.RLock()          # LLVM's global state is not thread-safe: one compile at a time
_tm: llvm.TargetMachine | None = None
_layout = ""


def _init() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # llvm.initialize() is deprecated (a no-op) in new llvmlite
        try:
            llvm.initialize()
        except Exception:
            pass
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


def _new_target_machine() -> llvm.TargetMachine:
    target = llvm.Target.from_triple(llvm.get_process_triple())
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(), features=host_features(), opt=3,
                                        reloc="default", codemodel="jitdefault")


def target_machine() -> llvm.TargetMachine:
    """The shared -O3 target machine for this host's CPU and features (for optimising and emitting)."""
    global _tm, _layout
    with _lock:
        if _tm is None:
            _init()
            _tm = _new_target_machine()
            _layout = str(_tm.target_data)
        return _tm


def host_features() -> str:
    return llvm.get_host_cpu_features().flatten()


def host_cpu() -> str:
    return llvm.get_host_cpu_name()


def triple() -> str:
    return llvm.get_process_triple()


def toolchain_id() -> str:
    """What makes object code incompatible: llvmlite/LLVM versions, target triple, CPU and its features."""
    features = hashlib.sha256(host_features().encode()).hexdigest()[:16]
    llvm_version = ".".join(map(str, llvm.llvm_version_info))
    return f"llvmlite={llvmlite.__version__};llvm={llvm_version};triple={triple()};cpu={host_cpu()};feat={features}"


@dataclass
class Module:
    """A compiled kernel module: the engine that owns its machine code, and the optimised IR (if built)."""

    engine: llvm.ExecutionEngine
    ir_text: str | None

    def address(self, name: str) -> int:
        addr = self.engine.get_function_address(name)
        if not addr:
            raise RuntimeError(f"llvm backend: symbol '{name}' missing from compiled module")
        return addr


def optimize(text: str) -> llvm.ModuleRef:
    """Parse, verify and optimise LLVM IR text at -O3 with loop and SLP vectorisation."""
    with _lock:
        tm = target_machine()
        mod = llvm.parse_assembly(text)
        mod.triple = triple()
        mod.data_layout = _layout
        mod.verify()
        pto = llvm.create_pipeline_tuning_options(speed_level=3)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pto.loop_unrolling = True
        pto.loop_interleaving = True
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
        return mod


def emit_object(mod: llvm.ModuleRef) -> bytes:
    with _lock:
        return bytes(target_machine().emit_object(mod))


def load_object(obj: bytes, ir_text: str | None = None) -> Module:
    """An engine holding the machine code of object file `obj` (raises on a malformed object)."""
    with _lock:
        target_machine()
        host = llvm.parse_assembly("")
        host.triple = triple()
        engine = llvm.create_mcjit_compiler(host, _new_target_machine())   # the engine owns its machine
        engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        engine.finalize_object()
        return Module(engine, ir_text)


def assembly(mod_text: str) -> str:
    """Machine assembly of (optimised) LLVM IR text, for inspection and tests."""
    with _lock:
        return target_machine().emit_assembly(llvm.parse_assembly(mod_text))
