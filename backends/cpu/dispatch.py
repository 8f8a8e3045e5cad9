"""A kernel's whole-grid entry called with its packed argument block as a builtin function of no arguments
(issue 43, W5): `direct_caller(entry, block)()` is `entry(block)` with the GIL released, as the ctypes call
is, at ~50 ns a call instead of ~150-200 ns (ctypes converts the argument and goes through libffi).

One trampoline is JIT-compiled per process, on first use: `PyObject *f(PyObject *self, PyObject *unused)`
that reads (entry, block) from its `self`, a PyCapsule, releases the GIL around `entry(block)` and returns
None; each caller is a PyCFunction (METH_NOARGS) made from it and a capsule of its two addresses. Only the
documented C API is used (PyCapsule_GetPointer, PyEval_SaveThread/RestoreThread, Py_IncRef). Where it is
unavailable (not CPython) `direct_caller` gives the ctypes call itself.
"""

from __future__ import annotations

import ctypes
import functools
import threading

from ...core.locks import fork_safe

METH_NOARGS = 0x0004


class _MethodDef(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("meth", ctypes.c_void_p), ("flags", ctypes.c_int),
                ("doc", ctypes.c_char_p)]


_lock = fork_safe(threading.Lock())
_made: dict = {}            # "def": the _MethodDef (kept alive for every caller), "engine": its code


def _address(f) -> int:
    return ctypes.cast(f, ctypes.c_void_p).value


def _trampoline_ir(api) -> str:
    get, save = _address(api.PyCapsule_GetPointer), _address(api.PyEval_SaveThread)
    restore, incref, none = _address(api.PyEval_RestoreThread), _address(api.Py_IncRef), id(None)
    return f"""
define ptr @gk_direct_call(ptr %self, ptr %unused) {{
entry:
  %pair = call ptr inttoptr (i64 {get} to ptr)(ptr %self, ptr null)
  %fn = load ptr, ptr %pair
  %at = getelementptr ptr, ptr %pair, i64 1
  %block = load ptr, ptr %at
  %state = call ptr inttoptr (i64 {save} to ptr)()
  call void %fn(ptr %block)
  call void inttoptr (i64 {restore} to ptr)(ptr %state)
  call void inttoptr (i64 {incref} to ptr)(ptr inttoptr (i64 {none} to ptr))
  ret ptr inttoptr (i64 {none} to ptr)
}}
"""


def _method_def():
    """The trampoline's PyMethodDef (compiled on first use), or None where it cannot be made."""
    with _lock:
        if "def" not in _made:
            try:
                import llvmlite.binding as llvm
                from . import jit
                api = ctypes.pythonapi
                api.PyCapsule_New.restype = ctypes.py_object
                api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
                api.PyCFunction_NewEx.restype = ctypes.py_object
                api.PyCFunction_NewEx.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p]
                s = jit._init()         # LLVM initialised for the host
                mod = llvm.parse_assembly(_trampoline_ir(api))
                mod.triple = s["triple"]
                mod.verify()
                engine = llvm.create_mcjit_compiler(mod, s["tm"])
                engine.finalize_object()
                meth = engine.get_function_address("gk_direct_call")
                _made["engine"] = engine
                _made["def"] = _MethodDef(b"gradkit_direct_call", meth, METH_NOARGS, None) if meth else None
            except (AttributeError, OSError, RuntimeError, ImportError):     # not CPython, or no LLVM here
                _made["def"] = None
        return _made["def"]


def direct_caller(entry, block_addr: int) -> tuple:
    """(call, keep): `call()` runs `entry` (a ctypes function of one pointer) on `block_addr`; the caller keeps
    `keep`, `entry`'s code and the block alive for as long as it uses `call`."""
    md = _method_def()
    if md is None:
        return functools.partial(entry, block_addr), None
    pair = (ctypes.c_void_p * 2)(_address(entry), block_addr)
    capsule = ctypes.pythonapi.PyCapsule_New(ctypes.addressof(pair), None, None)
    return ctypes.pythonapi.PyCFunction_NewEx(ctypes.addressof(md), capsule, None), pair
