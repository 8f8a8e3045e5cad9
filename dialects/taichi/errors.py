"""The dialect's one error for Taichi features it does not have: it names the feature and the porting page."""

from __future__ import annotations

import gradkit as gk

PAGE = "docs/porting/taichi.md"


class TaichiUnsupportedError(gk.GradkitError, NotImplementedError):
    """A Taichi feature gradkit.taichi does not provide; the message names it and what to do instead."""


def unsupported(feature: str, instead: str = "") -> TaichiUnsupportedError:
    tail = f"; {instead}" if instead else ""
    return TaichiUnsupportedError(f"gradkit.taichi does not support {feature}{tail} (the list of what is and "
                                  f"is not supported: {PAGE})")


class TaichiNameUnsupportedError(TaichiUnsupportedError, AttributeError):
    """`ti.<name>` for a name gradkit.taichi does not translate: the dialect's one error, and an
    AttributeError too, so `hasattr(ti, name)` and `getattr(ti, name, default)` keep working."""


def unsupported_name(module: str, name: str) -> TaichiNameUnsupportedError:
    return TaichiNameUnsupportedError(f"module {module!r} has no attribute {name!r}: gradkit.taichi does not "
                                      f"translate Taichi's {module.replace('gradkit.taichi', 'ti')}.{name} (yet) "
                                      f"(the list of what is and is not supported: {PAGE})")
