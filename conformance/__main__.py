"""`python -m gradkit.conformance --device NAME [pytest arguments]`: the conformance suite on one or more
devices (every available one when no --device is given); ends with pytest's `N passed, N skipped, N failed`
line, where a skip reads "not declared: <feature>". `--list-features` prints what each device's backend
declares; `--register NAME=module:Class` adds a plugin that is not installed (a plugin under development)."""

from __future__ import annotations

import argparse
import sys

from . import run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gradkit.conformance", description=__doc__.splitlines()[0])
    parser.add_argument("--device", action="append", default=[],
                        help="a gradkit device name (\"cpu\", \"opencl:0\", \"foo\"); repeat for several")
    parser.add_argument("--list-devices", action="store_true", help="print the available devices and exit")
    parser.add_argument("--list-features", action="store_true",
                        help="print the contract version and the declared primitives, atomics and features of "
                             "each device (or of the --device ones) and exit")
    parser.add_argument("--register", action="append", default=[], metavar="NAME=module:Class",
                        help="register a backend class under NAME before running (repeatable)")
    args, rest = parser.parse_known_args(argv)
    for spec in args.register:
        _register(spec)
    if args.list_features:
        return _list_features(args.device)
    if args.list_devices:
        import gradkit as gk
        for d in gk.get_devices():
            print(f"{d.name}\t{d.description}")
        return 0
    return run(args.device or None, rest)


def _register(spec: str) -> None:
    import importlib

    from gradkit.backends import registry
    name, _, target = spec.partition("=")
    module, _, attr = target.partition(":")
    if not (name and module and attr):
        raise SystemExit(f"--register wants NAME=module:Class, got {spec!r}")
    registry.register(name, getattr(importlib.import_module(module), attr))


def _list_features(devices: list[str]) -> int:
    import gradkit as gk
    from gradkit.backends.capabilities import CONTRACT_VERSION, capabilities_of, everything
    from gradkit.core.passes.lower_capabilities import FALLBACKS
    full = everything()
    for d in [gk.get_device(n) for n in devices] or gk.get_devices():
        caps = capabilities_of(d.impl)
        version = getattr(d.impl, "contract_version", None) or 1
        print(f"{d.name}\tcontract {version} (gradkit's: {CONTRACT_VERSION})")
        print(f"  primitives: {' '.join(sorted(caps.primitives))}")
        print(f"  atomics:    {' '.join(sorted(caps.atomics))}")
        print(f"  features:   {' '.join(sorted(caps.features))}")
        missing = sorted(set(full.names()) - set(caps.names()))
        lowered = [m for m in missing if m in FALLBACKS or m in ("rsqrt", "stop_gradient")
                   or (m.startswith("atomic_") and "cas" in caps.features)]
        print(f"  not declared: {' '.join(missing) or '-'}")
        print(f"    of which gradkit lowers: {' '.join(lowered) or '-'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
