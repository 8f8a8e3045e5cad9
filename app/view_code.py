"""Code view: per kernel its Python source, core IR, adjoint IR and generated code per device."""

from __future__ import annotations

import streamlit as st

from . import data


def render(bundle, name: str) -> None:
    kernels = sorted(bundle.manifest["kernels"])
    if not kernels:
        st.warning("This bundle holds no kernels.")
        return
    kernel = st.selectbox("Kernel", kernels, key="code_kernel")
    code = data.kernel_code(bundle, kernel)
    if code["file"]:
        st.caption(f"{code['file']}:{code['first_line']}")
    tabs = ["Python", "Core IR", "Adjoint IR"]
    generated = [(dev, variant, text) for dev, variants in sorted(code["code"].items())
                 for variant, text in variants.items()]
    parts = st.tabs(tabs + [f"{dev} {variant}" for dev, variant, _ in generated])
    with parts[0]:
        st.code(code["python"], language="python", line_numbers=True)
    with parts[1]:
        st.code(code["ir"], language=None)
    with parts[2]:
        st.code(code["adjoint_ir"], language=None)
    for tab, (dev, variant, text) in zip(parts[3:], generated):
        with tab:
            if variant == "error":
                st.error(f"code generation failed on {dev}: {text}")
            else:
                st.code(text, language=data.code_language(dev), line_numbers=True)
