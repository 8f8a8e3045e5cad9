"""The OpenCL backend plugin, registered as `opencl` in the `gradkit.backends` entry-point group."""

from .backend import OpenCLBackend

__all__ = ["OpenCLBackend"]
