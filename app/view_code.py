"""Code view: per kernel its Python source, core IR, adjoint IR, the IR before and after each pass (AD passes
included) and generated code per device."""

from __future__ import annotations

import streamlit as st

from . import data, pass_data
from .ui import plain


def render(bundle, name: str) -> None:
    kernels = sorted(bundle.manifest["kernels"])
    if not kernels:
        st.warning("This bundle holds no kernels.")
        return
    kernel = st.selectbox("Kernel", kernels, key="code_kernel")
    code = data.kernel_code(bundle, kernel)
    if code["file"]:
        st.caption(plain(f"{code['file']}:{code['first_line']}"))
    tabs = ["Python", "Core IR", "Adjoint IR", "Passes"]
    generated = [(dev, variant, text) for dev, variants in sorted(code["code"].items())
                 for variant, text in variants.items()]
    if generated:
        st.caption(plain("Generated code stored for: " + ", ".join(f"{dev} {variant}" for dev, variant, _ in generated)
                         + " (the Generated code tab draws the one you pick)."))
    parts = st.tabs(tabs + (["Generated code"] if generated else []))
    with parts[0]:
        st.code(code["python"], language="python", line_numbers=True)
    with parts[1]:
        st.code(code["ir"], language=None)
    with parts[2]:
        st.code(code["adjoint_ir"], language=None)
    with parts[3]:
        _passes(bundle, kernel)
    if generated:
        with parts[4]:
            _generated(kernel, generated)


def _generated(kernel: str, generated: list) -> None:
    """One device's code of one variant, drawn once picked: a kernel's LLVM is 50-70 KB of highlighted lines,
    and drawing every variant's in hidden tabs made the view take 4-5 s on a 200-launch program."""
    names = [f"{dev} {variant}" for dev, variant, _ in generated]
    pick = st.selectbox("Generated code of", names, index=None, key=f"code_generated_{kernel}",
                        placeholder=f"pick one of {len(names)}: device and variant")
    if pick is None:
        return
    dev, variant, text = generated[names.index(pick)]
    if variant == "error":
        st.error(plain(f"code generation failed on {dev}: {text}"))
    else:
        st.code(text, language=data.code_language(dev), line_numbers=True)

def _passes(bundle, kernel: str) -> None:
    """Pick a variant and a pass: the IR before and after it side by side, their unified diff below."""
    variant = st.selectbox("Variant", pass_data.pass_variants(bundle, kernel), key="passes_variant",
                           help="forward and adjoint, and every other variant the recorded launches ran")
    steps = pass_data.pass_steps(bundle, kernel, variant)
    if steps is None:
        st.info("This bundle predates pass logs: it stores no IR per pass. Record it again with this gradkit "
                "to see each pass.")
        return
    if not steps:
        why = (": it was declared with enable_backward=False, or building its adjoint failed (see the Adjoint "
               "IR tab and the bundle's notes)." if variant == "adjoint" else ".")
        st.info(plain(f"No {variant} pass log is stored for '{kernel}'{why}"))
        return
    device = pass_data.pass_device(bundle, kernel)
    backend = ""
    if device and any(s["name"].startswith("expand") for s in steps):
        backend = f", then {device}'s backend stage"
    elif device:
        backend = f" ({device}'s backend stage had nothing to expand)"
    st.caption(plain(f"The IR after each pass building the {variant} variant from the typed IR{backend}."))
    labels = [f"{s['index']}. {s['name']}" + ("" if s["changed"] or s["index"] == 0 else " — no change")
              for s in steps]
    index = st.selectbox("Pass", range(len(steps)), index=pass_data.first_change(steps), format_func=labels.__getitem__,
                         key=f"passes_step_{kernel}_{variant}")
    step = pass_data.pass_step(bundle, kernel, variant, index)
    if step["truncated"]:
        st.warning("Long IR was truncated to keep the bundle small (see the bundle's notes).")
    before, after = st.columns(2)
    with before:
        st.markdown(f"**Before** — {plain(labels[index - 1])}" if index else "**Before**")
        if step["before"] is None:
            st.caption("Nothing: the first step is the pipeline's input, the kernel's typed IR.")
        else:
            st.code(step["before"], language=None)
    with after:
        st.markdown(f"**After** — {plain(labels[index])}")
        st.code(step["after"], language=None)
    st.markdown("**Diff**")
    if step["before"] is None:
        st.caption("No diff: nothing comes before the input.")
    elif not step["changed"]:
        st.caption("This pass left the IR unchanged.")
    else:
        st.code(step["diff"], language="diff")
