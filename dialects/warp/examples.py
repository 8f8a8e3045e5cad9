"""`warp.examples`: where Warp's example assets are (the installed Warp package's, when there is one)."""

from __future__ import annotations

import importlib.util
import os


def get_source_directory() -> str:
    spec = importlib.util.find_spec("warp")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("gradkit.warp.examples: Warp's examples come with the warp-lang package, "
                                "which is not installed")
    return os.path.join(list(spec.submodule_search_locations)[0], "examples")


def get_asset_directory() -> str:
    return os.path.join(get_source_directory(), "assets")


def get_output_directory() -> str:
    return os.path.join(os.getcwd(), "example_output")
