"""`warp.render`, headless: gradkit does not render. Every renderer constructs and accepts every call,
does nothing, and says so once on stderr, so Warp's examples run with rendering off."""

from __future__ import annotations

import sys

_said = []


def _say() -> None:
    if not _said:
        _said.append(True)
        print("gradkit.warp.render: rendering is off in gradkit (headless no-op renderer)", file=sys.stderr)


class _NoOpRenderer:
    def __init__(self, *args, **kwargs):
        _say()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _noop

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


def _noop(*args, **kwargs):
    return None


class UsdRenderer(_NoOpRenderer):
    pass


class OpenGLRenderer(_NoOpRenderer):
    pass


class TinyRenderer(_NoOpRenderer):
    pass


def __getattr__(name: str):
    if name[:1].isupper():
        return _NoOpRenderer
    raise AttributeError(f"module 'gradkit.warp.render' has no attribute {name!r}")
