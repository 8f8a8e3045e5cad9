"""`python -m gradkit.conformance --device NAME [pytest arguments]`: the conformance suite on one or more
devices (every available one when no --device is given); ends with pytest's `N passed, N failed` line."""

from __future__ import annotations

import argparse
import sys

from . import run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gradkit.conformance", description=__doc__.splitlines()[0])
    parser.add_argument("--device", action="append", default=[],
                        help="a gradkit device name (\"cpu\", \"opencl:0\", \"foo\"); repeat for several")
    parser.add_argument("--list-devices", action="store_true", help="print the available devices and exit")
    args, rest = parser.parse_known_args(argv)
    if args.list_devices:
        import gradkit as gk
        for d in gk.get_devices():
            print(f"{d.name}\t{d.description}")
        return 0
    return run(args.device or None, rest)


if __name__ == "__main__":
    sys.exit(main())
