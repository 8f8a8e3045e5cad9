"""`@gk.func_native` on the OpenCL backend: the "opencl" snippet is the body of an OpenCL C function.

Parameters keep their names: scalars by value, arrays as `__global T*` (flat, row-major). The adjoint
function also receives `adj_ret`, `__global T* adj_<p>` per float array, and declares a local
`adj_<p> = 0` per float scalar that the snippet adds into; its final value is handed back to the kernel.
"""

from __future__ import annotations

import hashlib

from .ops import ctype


def _param(cg, name: str, t) -> str:
    return f"__global {ctype(t.scalar)}* {name}" if t.is_array else f"{ctype(t)} {name}"


def _arg(cg, v) -> str:
    return cg.arrays[v.id].name if v.type.is_array else cg.var(v)


def emit_native(cg, ins, d: int) -> None:
    spec, variant = ins.attrs["native"], ins.attrs["variant"]
    body = spec.snippet("opencl", variant)
    n = len(spec.params)
    params = [_param(cg, name, t) for name, t in spec.params]
    args = [_arg(cg, a) for a in ins.args[:n]]
    digest = hashlib.sha256(body.encode()).hexdigest()[:10]
    name = f"gk_native_{spec.name}_{variant}_{digest}"
    if variant != "adjoint":
        ret = ctype(spec.ret_type) if spec.ret_type is not None else "void"
        cg.native_defs.setdefault(name, f"inline {ret} {name}({', '.join(params)})\n{{\n{body}\n}}\n")
        call = f"{name}({', '.join(args)})"
        if ins.results:
            cg.emit(d, f"const {cg.decl(ins.results[0])} = {call};")
        else:
            cg.emit(d, f"{call};")
        return
    extra = ins.args[n:]
    if spec.ret_type is not None:
        params.append(f"{ctype(spec.ret_type)} adj_ret")
    for k in spec.float_arrays():
        pname, t = spec.params[k]
        params.append(_param(cg, f"adj_{pname}", t))
    scalars = [spec.params[k] for k in spec.float_scalars()]
    params += [f"{ctype(t)}* gk_out_adj_{pname}" for pname, t in scalars]
    locals_ = "".join(f"    {ctype(t)} adj_{pname} = 0;\n" for pname, t in scalars)
    outs = "".join(f"    *gk_out_adj_{pname} = adj_{pname};\n" for pname, _ in scalars)
    cg.native_defs.setdefault(name, f"inline void {name}({', '.join(params)})\n{{\n{locals_}"
                                    f"    {{\n{body}\n    }}\n{outs}}}\n")
    for r in ins.results:
        cg.emit(d, f"{cg.decl(r)} = 0;")
    args += [_arg(cg, a) for a in extra] + [f"&{cg.var(r)}" for r in ins.results]
    cg.emit(d, f"{name}({', '.join(args)});")
