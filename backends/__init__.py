"""Backend plugins. `gk.backends.available()` lists the loaded ones; see backends/README.md."""

from __future__ import annotations

from .contract import CONTRACT_VERSION  # noqa: F401  (the plugin contract gradkit speaks)


def available() -> list[str]:
    """Names of the backend plugins that loaded (entry-point group `gradkit.backends`)."""
    from .registry import available as _available
    return _available()
