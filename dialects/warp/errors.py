"""The errors of Warp's dialect: a Warp feature gradkit does not have yet is one named error (never an
AttributeError, never a silently different number)."""

from __future__ import annotations

from ..core.errors import GradkitError

GUIDE = "docs/porting/warp.md"


class WarpFeatureMissing(GradkitError, NotImplementedError):
    """A name of Warp 1.19 that gradkit.warp does not provide (yet): the message names it and the guide."""

    def __init__(self, name: str, why: str = ""):
        self.feature = name
        text = f"gradkit.warp: wp.{name} is not available in gradkit"
        super().__init__(f"{text}{': ' + why if why else ''} (see {GUIDE} for what runs and what does not)")


GEOMETRY = {
    "Volume": "NanoVDB volumes are not planned",
}


def missing(name: str):
    """A stand-in that raises WarpFeatureMissing when called or used as a type."""
    why = GEOMETRY.get(name, "")

    class _Missing:
        __qualname__ = __name__ = name

        def __new__(cls, *args, **kwargs):
            raise WarpFeatureMissing(name, why)

        def __class_getitem__(cls, item):
            raise WarpFeatureMissing(name, why)

    return _Missing
