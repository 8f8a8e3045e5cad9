"""Expand: Python's floored `//` and `%` written in truncating idiv / irem once, in IR. A runtime divisor
guards 0 (result 0) and -1 (MIN // -1 wraps: -x, x % -1 is 0) and steps the quotient down when the
remainder's sign differs from the divisor's; a constant positive divisor needs only `r < 0`, a negative
one `r > 0`; uint only guards 0; floats are floor(a / b) and a - b * floor(a / b)."""
import gradkit as gk

STAGES = ("expand", "backend")


@gk.kernel
def floor_div_mod(n: int, u: gk.uint32, f: float, out: gk.array(dtype=int), uo: gk.array(dtype=gk.uint32),
                  fo: gk.array(dtype=float)):
    i = gk.tid()
    out[i] = i // n + i % n + i // 4 + i % -4
    uo[i] = gk.uint32(i) // u + gk.uint32(i) % gk.uint32(8)
    fo[i] = f // 0.5 + f % 0.5
