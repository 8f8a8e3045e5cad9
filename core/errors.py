"""The gradkit exception hierarchy (every error derives from GradkitError)."""

from __future__ import annotations


class GradkitError(Exception):
    """Base class of every error gradkit raises."""


class CompileError(GradkitError, SyntaxError):
    """Kernel source gradkit cannot compile; the message shows file:line:col and a caret.
    Raised by gradkit (at a kernel's first launch, or `kernel.ir()`), also a `SyntaxError`.

    Args:
        message: the whole message: the kernel, file:line:col, the source line and a caret under the node."""

    def __init__(self, message: str):
        # SyntaxError's own formatting would re-render location fields; keep our message whole.
        Exception.__init__(self, message)
        self.msg = message

    def __str__(self) -> str:
        return self.msg


class DeviceError(GradkitError, RuntimeError):
    """A device or backend plugin is missing or unusable."""


class GradientRuleError(GradkitError, RuntimeError):
    """A recorded launch breaks a rule the backward pass relies on."""


class GradientRuleWarning(UserWarning):
    """A kernel certainly breaks a gradient rule (found from source alone)."""


class GradientHazardWarning(GradientRuleWarning):
    """A recorded step whose gradient is zero by construction: a write overwritten before anything read it,
    a parameter used only through int(), comparisons or stop_gradient (`tape.hazards()`)."""


class CacheTrustWarning(UserWarning):
    """A kernel-cache folder or entry someone else could have written (not yours, writable by group or
    others, a symbolic link) was not used: its kernels are compiled in memory. See docs/security.md."""


class GradientCheckError(GradkitError, AssertionError):
    """Analytic and finite-difference gradients disagree."""


class NaNError(GradkitError, FloatingPointError):
    """A launch produced a NaN or Inf in an array."""


class StackOverflowError(GradkitError, RuntimeError):
    """The reverse pass's per-thread value stack ran out of room."""


class DeviceMemoryError(GradkitError, MemoryError):
    """A buffer larger than its device can hold; the message names the size, the device and its limits."""


def format_bytes(nbytes: int) -> str:
    """A byte count for messages: '16.00 GiB'."""
    size, unit = float(nbytes), "bytes"
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if size < 1024 or unit == "EiB":
            break
        size /= 1024
    return f"{int(size)} bytes" if unit == "bytes" else f"{size:.2f} {unit}"


def allocation_error(nbytes: int, device: str, limits: str) -> DeviceMemoryError:
    """The error every backend raises for a buffer it cannot have, so all read alike."""
    return DeviceMemoryError(f"cannot allocate {format_bytes(nbytes)} ({nbytes} bytes) on device '{device}': "
                             f"{limits}")


class SourceLoc:
    """Where an IR instruction came from: file, line, column (1-based line, 0-based col)."""

    __slots__ = ("file", "line", "col", "text", "func")

    def __init__(self, file: str, line: int, col: int, text: str = "", func: str = ""):
        self.file, self.line, self.col, self.text, self.func = file, line, col, text, func

    def __repr__(self) -> str:
        return f"{self.file}:{self.line}:{self.col + 1}"

    def render(self) -> str:
        """'file:line:col' then the source line with a caret under the column."""
        out = f"{self.file}:{self.line}:{self.col + 1}"
        if self.text:
            line = self.text.rstrip("\n")
            stripped = line.lstrip()
            shift = len(line) - len(stripped)
            out += f"\n    {stripped}\n    {' ' * max(self.col - shift, 0)}^"
        return out


def compile_error(kernel: str, loc: SourceLoc | None, message: str) -> CompileError:
    """Build a CompileError naming the kernel, with the location and caret when known."""
    text = f"in kernel '{kernel}': {message}"
    if loc is not None:
        text = f"{loc.render().splitlines()[0]}: {text}"
        rest = loc.render().splitlines()[1:]
        if rest:
            text += "\n" + "\n".join(rest)
    return CompileError(text)
