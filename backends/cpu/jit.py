"""LLVM set-up for the host: target machines (-O3 and the quick tier's -O0, host CPU features), the new
pass manager, one MCJIT engine that loads each kernel's object code (compiled now or read from the disk
cache)."""

from __future__ import annotations

import hashlib
import os
import re
import threading
import warnings

import llvmlite
import llvmlite.binding as llvm

from ...core.locks import fork_safe
from .layout import ALL, LOCAL
from .libm import register_libm
from .thread_loops import STREAM_TBAA

def _source_hash() -> str:
    """A hash of this backend's code and the shared analyses it uses, so editing either invalidates cached
    objects."""
    import pathlib
    here = pathlib.Path(__file__).parent
    h = hashlib.sha256()
    for f in [*sorted(here.glob("*.py")), here.parent / "analysis.py", here.parent / "base.py"]:
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


BACKEND_VERSION = "cpu-" + _source_hash()
_lock = fork_safe(threading.Lock())
_state: dict = {}

# llvmlite runs every LLVM call under one lock of its own, which it does not reset at fork: a child forked
# while another thread was inside LLVM (compiling, loading a kernel) would wait on it for ever, and LLVM's
# state would be half-updated besides. So a fork waits for the LLVM call in progress to end (one pass
# pipeline at most) and holds the lock across the fork; parent and child then release it.
_LLVM_LOCK = getattr(getattr(llvm.ffi, "lib", None), "_lock", None)
if _LLVM_LOCK is not None and hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_LLVM_LOCK.__enter__,
                        after_in_parent=lambda: _LLVM_LOCK.__exit__(None, None, None),
                        after_in_child=lambda: _LLVM_LOCK.__exit__(None, None, None))


def _init():
    if _state:
        return _state
    try:
        llvm.initialize()
    except RuntimeError:
        pass   # llvmlite ≥ 0.45 initialises itself
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    register_libm()
    target = llvm.Target.from_default_triple()
    cpu, features = llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
    tm = target.create_target_machine(cpu=cpu, features=features, opt=3, reloc="default", codemodel="jitdefault")
    # The quick tier (see optimize): no IR passes, fast instruction selection and register allocation.
    quick = target.create_target_machine(cpu=cpu, features=features, opt=0, reloc="default",
                                         codemodel="jitdefault")
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
    _state.update(tm=tm, quick_tm=quick, engine=engine, cpu=cpu, features=features,
                  triple=llvm.get_process_triple())
    return _state


def host_description() -> str:
    s = _init()
    return f"{s['cpu']} ({s['triple']})"


def cache_key(fingerprint: str, options_key: str) -> str:
    s = _init()
    from ... import __version__ as gradkit_version
    parts = [gradkit_version, BACKEND_VERSION, fingerprint, options_key, llvmlite.__version__,
             ".".join(map(str, llvm.llvm_version_info)), s["cpu"], s["features"]]
    return "cpu:" + hashlib.sha256("|".join(parts).encode()).hexdigest()


def optimize(module_text: str, quick: bool = False, vectorize: bool = True) -> tuple[bytes, str]:
    """Parse, verify, optimise at -O3 and emit object code; returns (object bytes, optimised IR text).

    `quick`: no optimisation passes and LLVM's -O0 code generator (about 1 ms instead of 15 for a small
    kernel, slower code). The IR is the same, and without fast-math flags LLVM keeps IEEE semantics at
    every level, so both tiers compute identical results (backend.py offers it only to such kernels).
    `vectorize=False`: -O3 without the loop vectoriser (the scalar tier, see SCALAR), which is most of
    -O3's time on big kernel bodies and gains nothing on launches of a few dozen threads."""
    from .mathlib import define_called   # the code generator's; a warm start never imports it
    s = _init()
    mod = _parse(module_text, s)
    if quick:
        text = define_called(module_text)
        if text is not module_text:
            mod = _parse(text, s)
        return s["quick_tm"].emit_object(mod), text
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = vectorize
    pto.slp_vectorization = True
    pto.loop_unrolling = True
    pb = llvm.create_pass_builder(s["tm"], pto)
    pb.getModulePassManager().run(mod, pb)
    optimised = str(mod)
    text = mark_nontemporal(define_called(optimised))
    if text is not optimised:     # math functions defined after vectorisation: inline them, tidy up
        mod = _parse(text, s)
        late = llvm.create_new_module_pass_manager()
        late.add_always_inliner_pass()
        late.add_new_gvn_pass()
        late.add_instruction_combine_pass()
        late.add_simplify_cfg_pass()
        late.add_global_dead_code_eliminate_pass()
        late.run(mod, pb)
    return s["tm"].emit_object(mod), str(mod)


_META = re.compile(r"^!(\d+) = (?:distinct )?!\{(.*)\}$", re.M)
_TAGGED_STORE = re.compile(r"^(\s*store <(\d+) x (float|double|i32|i64)> .*, align (\d+)), !tbaa !(\d+)$", re.M)
_BYTES = {"float": 4, "double": 8, "i32": 4, "i64": 8}


def mark_nontemporal(text: str) -> str:
    """Optimised IR with the vector stores that carry the streamed-store tag (thread_loops.streaming_loops)
    made non-temporal where their alignment allows it (an x86 streaming store needs a whole aligned
    vector); scalar stores (the vector loop's remainder) stay as they are. `text` itself when none."""
    if STREAM_TBAA not in text:
        return text
    meta = {int(k): body for k, body in _META.findall(text)}
    roots = {k for k, body in meta.items() if body == f'!"{STREAM_TBAA}"'}
    kinds = {k for k, body in meta.items() if any(body.startswith(f'!"{STREAM_TBAA}.element", !{r},') for r in roots)}
    tags = {k for k, body in meta.items() if any(body == f"!{t}, !{t}, i64 0" for t in kinds)}
    nt = max(meta, default=0) + 1
    count = 0

    def mark(m):
        nonlocal count
        if int(m.group(5)) not in tags or int(m.group(2)) * _BYTES[m.group(3)] > int(m.group(4)):
            return m.group(0)
        count += 1
        return f"{m.group(1)}, !nontemporal !{nt}"
    out = _TAGGED_STORE.sub(mark, text)
    return out + f"\n!{nt} = !{{i32 1}}\n" if count else text


def _parse(text: str, s: dict):
    mod = llvm.parse_assembly(text)
    mod.triple = s["triple"]
    mod.data_layout = str(s["tm"].target_data)
    mod.verify()
    return mod


def load_object(obj: bytes, symbol: str) -> tuple[int, int, int]:
    """Add object code to the engine; returns the addresses of `symbol`, of its whole-grid entry and of its
    local entry (0 when the kernel has none: codegen.py LOCAL)."""
    s = _init()
    with _lock:
        s["engine"].add_object_file(llvm.ObjectFileRef.from_data(obj))
        s["engine"].finalize_object()
        engine = s["engine"]
        addrs = (engine.get_function_address(symbol), engine.get_function_address(symbol + ALL),
                 engine.get_function_address(symbol + LOCAL))
    if not all(addrs[:2]):
        raise RuntimeError(f"cpu backend: symbol {symbol} not found after loading object code")
    return addrs


# Tiers of a kernel's code, each with its own symbol and cache-key suffix (several may be loaded at once):
# FULL is -O3 with the loop vectoriser; SCALAR the same without it (straight-line kernels launched many
# times over few threads: rigid_body's 94 kB adjoint compiles in 0.10 s instead of 0.57); QUICK no IR
# passes and -O0 code generation. backend.py offers SCALAR only to kernels that compute identical results
# on every tier (no fast math, no sums LLVM may reassociate), QUICK only to those of them without loops.
FULL, SCALAR, QUICK = "", "_s", "_q"
_BETTER = {QUICK: (FULL, SCALAR, QUICK), SCALAR: (FULL, SCALAR), FULL: (FULL,)}   # cache lookups, best first


def _cached(cache, key: str, symbol: str):
    blob = cache.get(key)
    if blob is None:
        return None
    try:
        text_len = int.from_bytes(blob[:8], "little")
        text = blob[8:8 + text_len].decode()
        return load_object(blob[8 + text_len:], symbol), text
    except Exception as exc:   # unreadable entry: rebuild
        warnings.warn(f"gradkit: ignoring an unreadable kernel cache entry ({exc}); recompiling")
        return None


def lookup(cache, key: str, symbol: str, tier: str = FULL) -> tuple[tuple, str, str] | None:
    """`tier`'s object or a better one from the disk cache, loaded (as `compile_cached` returns it), or None."""
    if cache is not None:
        for t in _BETTER[tier]:
            hit = _cached(cache, key + t, symbol + t)
            if hit is not None:
                return (*hit, t)
    return None


def compile_cached(module_text_fn, symbol: str, key: str, cache, tier: str = FULL) -> tuple[tuple, str, str]:
    """Object code from the disk cache when present (a corrupt entry is rebuilt), else compiled now.
    `module_text_fn(symbol, small)` gives the module (`small`: for the QUICK and SCALAR tiers, whose launches
    are small). `tier` is the least the caller wants: a better tier's object already in the cache is
    preferred (FULL, then SCALAR, then QUICK), else `tier` is compiled. Returns ((entry address, whole-grid
    entry address, local entry address), IR text, the tier loaded)."""
    register_libm()                      # math functions of builtins registered since the last compile
    hit = lookup(cache, key, symbol, tier)
    if hit is not None:
        return hit
    key, symbol = key + tier, symbol + tier
    obj, text = optimize(module_text_fn(symbol, tier != FULL), tier == QUICK, tier == FULL)
    if cache is not None:
        raw = text.encode()
        cache.put(key, len(raw).to_bytes(8, "little") + raw + obj)
    return load_object(obj, symbol), text, tier
