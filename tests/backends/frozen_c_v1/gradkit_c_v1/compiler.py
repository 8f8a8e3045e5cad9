"""The system C compiler: found and probed once (is there one, does it take `-fopenmp`), then used to build
each kernel's source into a shared library loaded with ctypes.

Data is never code: nothing compiled is kept on disk across processes. Each process compiles into its own
temporary directory (removed at exit; a library is unlinked as soon as it is loaded) and keeps the loaded
libraries in memory, keyed by sha256 of the source and flags. A lock makes compiles thread-safe.
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass

from gradkit.core.errors import CompileError, DeviceError

FLAGS = ["-O2", "-std=gnu11", "-fPIC", "-shared",
         "-ffp-contract=off",        # no fused multiply-adds: float math rounds as written (as NumPy does)
         "-fno-math-errno",          # sqrt and friends may inline; results are the same
         "-fwrapv",                  # signed integers wrap modulo 2**bits, as gradkit's integer ops do
         "-fno-strict-aliasing",     # float atomics reinterpret element bits through integer pointers
         "-Wno-unknown-pragmas"]     # OpenMP pragmas in a build without -fopenmp
# gk.config.fast_math: reassociation and reciprocals, but NaN and infinity tests keep working
FAST_MATH = ["-fassociative-math", "-fno-signed-zeros", "-fno-trapping-math", "-freciprocal-math",
             "-ffp-contract=fast"]
OPENMP_PROBE = "#include <omp.h>\nint gk_probe(void) { return omp_get_max_threads(); }\n"
KERNEL_T = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
INSTALL_HINT = ("install one (Debian/Ubuntu: apt-get install gcc; Fedora: dnf install gcc; macOS: "
                "xcode-select --install) or point the CC environment variable at one")


@dataclass(frozen=True)
class Toolchain:
    """The compiler command, its first version line, and whether it builds OpenMP code."""

    cc: str
    version: str
    openmp: bool


_lock = threading.Lock()
_toolchains: dict[str, Toolchain] = {}
_libraries: dict[str, tuple] = {}        # sha256(source, flags) -> (CDLL, entry point)
_workdir: str | None = None


def _run(cmd: list[str], cwd: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)


def toolchain(cc: str | None = None) -> Toolchain:
    """The compiler named by `cc` (default: $CC, else `cc`), probed once; DeviceError if there is none."""
    cc = cc or os.environ.get("CC") or "cc"
    with _lock:
        found = _toolchains.get(cc)
        if found is None:
            found = _toolchains[cc] = _probe(cc)
    return found


def _probe(cc: str) -> Toolchain:
    path = shutil.which(cc)
    if path is None:
        raise DeviceError(f"the c backend needs a C compiler, and '{cc}' is not on PATH: {INSTALL_HINT}")
    version = _run([path, "--version"]).stdout.partition("\n")[0].strip() or cc
    with tempfile.TemporaryDirectory(prefix="gradkit-c-probe-") as tmp:
        plain = _build_probe(path, tmp, "int gk_probe(void) { return 1; }\n", [])
        if plain.returncode != 0:
            raise DeviceError(f"the c backend's C compiler '{cc}' cannot build a shared library:\n"
                              f"{plain.stderr.strip()}\nFix the compiler setup or {INSTALL_HINT}")
        omp = _build_probe(path, tmp, OPENMP_PROBE, ["-fopenmp"])
    return Toolchain(path, version, omp.returncode == 0)


def _build_probe(cc: str, tmp: str, source: str, extra: list[str]) -> subprocess.CompletedProcess:
    src = os.path.join(tmp, "probe.c")
    with open(src, "w") as f:
        f.write(source)
    return _run([cc, *FLAGS, *extra, "-o", os.path.join(tmp, "probe.so"), src])


def flags(tool: Toolchain, openmp: bool, fast_math: bool) -> list[str]:
    return FLAGS + (["-fopenmp"] if openmp and tool.openmp else []) + (FAST_MATH if fast_math else [])


def _directory() -> str:
    """This process's scratch directory for sources and libraries (removed at exit)."""
    global _workdir
    if _workdir is None:
        _workdir = tempfile.mkdtemp(prefix="gradkit-c-")
        atexit.register(shutil.rmtree, _workdir, True)
    return _workdir


def load(tool: Toolchain, source: str, symbol: str, build_flags: list[str], kernel_name: str):
    """The entry point `symbol` of `source` compiled with `build_flags` (memory cache, else a fresh build).
    A compiler error is a CompileError with the compiler's messages and the numbered source."""
    key = hashlib.sha256("\x00".join([tool.cc, *build_flags, source]).encode()).hexdigest()
    with _lock:
        hit = _libraries.get(key)
        if hit is not None:
            return hit[1]
        base = os.path.join(_directory(), key[:24])
        with open(base + ".c", "w") as f:
            f.write(source)
        try:
            result = _run([tool.cc, *build_flags, "-o", base + ".so", base + ".c", "-lm"])
            if result.returncode != 0:
                numbered = "\n".join(f"{k:4d}  {line}" for k, line in enumerate(source.splitlines(), 1))
                raise CompileError(
                    f"in kernel '{kernel_name}': the C compiler ({tool.version}) rejected the generated code "
                    f"(if the kernel calls a @gk.func_native 'c' snippet, check it; otherwise this is a "
                    f"gradkit bug, please report it):\n{result.stderr.strip()}\n"
                    f"--- generated C ---\n{numbered}")
            lib = ctypes.CDLL(base + ".so")
        finally:
            for ext in (".c", ".so"):
                if os.path.exists(base + ext):
                    os.unlink(base + ext)
        entry = KERNEL_T((symbol, lib))
        _libraries[key] = (lib, entry)
        return entry
