"""`gk.autograd`: Jacobians of a kernel launch (reverse mode, forward mode, central differences) and
gradient checks that compare them. These drive whole launches, so they live beside `launch` in runtime/."""

from __future__ import annotations

import numpy as np

from ...core.errors import GradientCheckError
from .jacobian_target import flat, make_target


def _limit(n: int, most: int) -> int:
    """How many of `n` rows/columns to evaluate: all when `most` <= 0 (Warp's -1 default)."""
    return n if most is None or most <= 0 else min(n, int(most))


def _blank(target, pairs) -> dict:
    """NaN-filled Jacobian blocks: entries a `max_*_per_var` limit leaves unevaluated stay NaN (as Warp)."""
    return {(o, i): np.full((target.output_size(o), flat(target.inputs[i]).size), np.nan) for o, i in pairs}


def _plotted(result: dict, function, target, plot: bool) -> dict:
    if plot:
        jacobian_plot(result, function, inputs=target.inputs)
    return result


def jacobian(function, dim=None, inputs=None, outputs=None, input_output_mask=None, device=None,
             max_outputs_per_var: int = -1, plot_jacobians: bool = False) -> dict:
    """Reverse-mode Jacobians {(out_idx, in_idx): (out.size*ncomp, in.size*ncomp) float64 array}, one adjoint
    per output row. `function` is a kernel (launched over `dim` with `inputs`, `outputs`) or a Python
    function of `inputs` that launches kernels and returns array(s) (`dim`, `outputs` not given).

    Args:
        function: a kernel, launched over `dim` with `inputs` and `outputs`; or a Python function of
            `inputs` that launches kernels and returns its output array(s) (then `dim` and `outputs` are
            not given).
        dim: the launch dimensions of a kernel (an int or a tuple of up to 4 ints).
        inputs: the arguments before the outputs, arrays and scalars, in the kernel's parameter order; the
            Jacobian's columns are the elements of the float arrays among them.
        outputs: the kernel's output arrays (its remaining parameters); the Jacobian's rows.
        input_output_mask: the (input, output) pairs to evaluate, as names or indices
            (`[("x", "y")]`, Warp 1.19's form); None evaluates every pair.
        device: where to launch (default: the arrays' device).
        max_outputs_per_var: evaluate at most this many rows per output (the rest read NaN); -1: all.
        plot_jacobians: also draw them with `jacobian_plot` (needs matplotlib)."""
    target = make_target(function, dim, inputs, outputs, device)
    try:
        pairs = target.pairs(input_output_mask)
        result = _blank(target, pairs)
        for o in dict.fromkeys(o for o, _ in pairs):
            n_rows = target.output_size(o)
            ins = [i for oo, i in pairs if oo == o]
            for row in range(_limit(n_rows, max_outputs_per_var)):
                seed = np.zeros(n_rows)
                seed[row] = 1.0
                grads = target.adjoint_row(o, seed)
                for i in ins:
                    result[(o, i)][row] = grads[i]
    finally:
        target.restore()
    return _plotted(result, function, target, plot_jacobians)


def _stored_dtype(a):
    """The NumPy scalar type `a` stores its elements in (so a step is measured as the array holds it)."""
    scalar = getattr(getattr(a, "dtype", None), "scalar", None)
    return np.dtype(getattr(scalar, "np_dtype", np.float64)).type


def jacobian_fd(function, dim=None, inputs=None, outputs=None, input_output_mask=None, device=None,
                max_inputs_per_var: int = -1, eps: float = 1e-4, plot_jacobians: bool = False) -> dict:
    """Central-difference Jacobians, as `jacobian` (kernel or function). Inputs and a kernel's outputs are put
    back as they were afterwards.

    Args:
        function: a kernel, launched over `dim` with `inputs` and `outputs`; or a Python function of
            `inputs` that launches kernels and returns its output array(s) (then `dim` and `outputs` are
            not given).
        dim: the launch dimensions of a kernel (an int or a tuple of up to 4 ints).
        inputs: the arguments before the outputs, arrays and scalars, in the kernel's parameter order; the
            Jacobian's columns are the elements of the float arrays among them.
        outputs: the kernel's output arrays (its remaining parameters); the Jacobian's rows.
        input_output_mask: the (input, output) pairs to evaluate, as names or indices
            (`[("x", "y")]`, Warp 1.19's form); None evaluates every pair.
        device: where to launch (default: the arrays' device).
        max_inputs_per_var: evaluate at most this many columns per input (the rest read NaN); -1: all.
        eps: the step of the central differences, (f(x + eps) - f(x - eps)) / 2 eps (divided by the step
            the input's precision actually took).
        plot_jacobians: also draw them with `jacobian_plot` (needs matplotlib)."""
    target = make_target(function, dim, inputs, outputs, device)
    saved = {}
    try:
        pairs = target.pairs(input_output_mask)
        result = _blank(target, pairs)
        for i in dict.fromkeys(i for _, i in pairs):
            outs = [o for o, ii in pairs if ii == i]
            base = saved[i] = flat(target.inputs[i])
            stored = _stored_dtype(target.inputs[i])
            for col in range(_limit(base.size, max_inputs_per_var)):
                values, ends = [], []
                for sign in (1.0, -1.0):
                    x = base.copy()
                    x[col] += sign * eps
                    ends.append(float(stored(x[col])))
                    target.set_input(i, x)
                    values.append(target.evaluate())
                # divide by the step the input's precision could take (x + eps rounds in float32), not 2*eps
                step = (ends[0] - ends[1]) or 2 * eps
                for o in outs:
                    result[(o, i)][:, col] = (values[0][o] - values[1][o]) / step
                target.set_input(i, base)
    finally:
        for i, base in saved.items():
            target.set_input(i, base)
        target.restore()
    return _plotted(result, function, target, plot_jacobians)


def jacobian_fwd(function, dim=None, inputs=None, outputs=None, input_output_mask=None, device=None,
                 max_inputs_per_var: int = -1, plot_jacobians: bool = False) -> dict:
    """Forward-mode Jacobians, one tangent launch (or tangent call of the function) per input column; the
    arguments' duals are put back as they were afterwards.

    Args:
        function: a kernel, launched over `dim` with `inputs` and `outputs`; or a Python function of
            `inputs` that launches kernels and returns its output array(s) (then `dim` and `outputs` are
            not given).
        dim: the launch dimensions of a kernel (an int or a tuple of up to 4 ints).
        inputs: the arguments before the outputs, arrays and scalars, in the kernel's parameter order; the
            Jacobian's columns are the elements of the float arrays among them.
        outputs: the kernel's output arrays (its remaining parameters); the Jacobian's rows.
        input_output_mask: the (input, output) pairs to evaluate, as names or indices
            (`[("x", "y")]`, Warp 1.19's form); None evaluates every pair.
        device: where to launch (default: the arrays' device).
        max_inputs_per_var: evaluate at most this many columns per input (the rest read NaN); -1: all.
        plot_jacobians: also draw them with `jacobian_plot` (needs matplotlib)."""
    target = make_target(function, dim, inputs, outputs, device)
    try:
        pairs = target.pairs(input_output_mask)
        result = _blank(target, pairs)
        for i in dict.fromkeys(i for _, i in pairs):
            outs = [o for o, ii in pairs if ii == i]
            n = flat(target.inputs[i]).size
            for col in range(_limit(n, max_inputs_per_var)):
                seed = np.zeros(n)
                seed[col] = 1.0
                tangents = target.tangent_column(i, seed)
                for o in outs:
                    result[(o, i)][:, col] = tangents[o]
    finally:
        target.restore()
    return _plotted(result, function, target, plot_jacobians)


def jacobian_plot(jacobians: dict, function=None, inputs=None, **options):
    """Draw Jacobians as images, one per (output, input) pair, and return the matplotlib Figure (the
    drawing lives in viz/: `gradkit.viz.jacobian_plot.jacobian_plot` lists the options).

    Args:
        jacobians: {(out_idx, in_idx): matrix}, as `jacobian`, `jacobian_fwd` and `jacobian_fd` return.
        function: the kernel or Python function they were taken of; names the axes (optional).
        inputs: its input arrays; their labels name the columns (optional).
        options: `show_plot` (call `pyplot.show()`, default True), `show_colorbar`,
            `scale_colors_per_submatrix`, `title`, `colormap`, `log_scale`, `filename` (save the figure,
            format from its suffix)."""
    from ...viz.jacobian_plot import jacobian_plot as plot
    return plot(jacobians, function, inputs=inputs, **options)


def _table(what: str, worst) -> str:
    lines = [f"gradient check failed for {what} (worst entries):",
             f"{'output':>8} {'input':>6} {'row':>6} {'col':>6} {'analytic':>14} {'numeric':>14} {'abs err':>11}"]
    for err, o, i, r, c, a, n in worst:
        lines.append(f"{o:>8} {i:>6} {r:>6} {c:>6} {a:>14.6g} {n:>14.6g} {err:>11.3g}")
    return "\n".join(lines)


def mismatches(analytic: np.ndarray, numeric: np.ndarray, atol: float, rtol: float):
    """(|analytic - numeric|, failing entries): |a - n| > atol + rtol*|n|, and every NaN/Inf on either side
    (a plain comparison is False for NaN, which would let a NaN gradient pass)."""
    with np.errstate(invalid="ignore"):
        err = np.abs(analytic - numeric)
        bad = ~(err <= atol + rtol * np.abs(numeric))
    bad |= ~np.isfinite(analytic) | ~np.isfinite(numeric)
    return err, bad


def gradcheck(function, dim=None, inputs=None, outputs=None, eps: float = 1e-4, atol: float = 1e-3,
              rtol: float = 1e-2, raise_exception: bool = True, device=None, show_worst: int = 10,
              input_output_mask=None, max_inputs_per_var: int = -1, max_outputs_per_var: int = -1,
              plot_relative_error: bool = False, plot_absolute_error: bool = False) -> bool:
    """Compare reverse-mode and central-difference Jacobians of a kernel launch or a function (as
    `jacobian`); True when |a - n| <= atol + rtol*|n| on every entry both evaluated (the first
    `max_outputs_per_var` rows by `max_inputs_per_var` columns of each pair), and no NaN/Inf there.

    Args:
        function: a kernel, launched over `dim` with `inputs` and `outputs`; or a Python function of
            `inputs` that launches kernels and returns its output array(s) (then `dim` and `outputs` are
            not given).
        dim: the launch dimensions of a kernel (an int or a tuple of up to 4 ints).
        inputs: the arguments before the outputs, arrays and scalars, in the kernel's parameter order; the
            Jacobian's columns are the elements of the float arrays among them.
        outputs: the kernel's output arrays (its remaining parameters); the Jacobian's rows.
        input_output_mask: the (input, output) pairs to evaluate, as names or indices
            (`[("x", "y")]`, Warp 1.19's form); None evaluates every pair.
        device: where to launch (default: the arrays' device).
        eps: the central-difference step.
        atol: the absolute tolerance of the comparison.
        rtol: the relative tolerance, times the finite-difference value.
        raise_exception: on a mismatch raise `gk.GradientCheckError` with a table of the worst entries
            (True) or return False.
        show_worst: how many entries that table lists.
        max_inputs_per_var: compare at most this many columns per input; -1: all.
        max_outputs_per_var: compare at most this many rows per output; -1: all.
        plot_relative_error: draw the relative error matrices with `jacobian_plot`.
        plot_absolute_error: draw the absolute error matrices with `jacobian_plot`."""
    analytic = jacobian(function, dim, inputs, outputs, input_output_mask=input_output_mask, device=device,
                        max_outputs_per_var=max_outputs_per_var)
    numeric = jacobian_fd(function, dim, inputs, outputs, input_output_mask=input_output_mask, device=device,
                          max_inputs_per_var=max_inputs_per_var, eps=eps)
    target = make_target(function, dim, inputs, outputs, device)
    worst, ok = [], True
    absolute, relative = {}, {}
    for (o, i), a in analytic.items():
        n = numeric[(o, i)]
        rows, cols = _limit(a.shape[0], max_outputs_per_var), _limit(a.shape[1], max_inputs_per_var)
        a, n = a[:rows, :cols], n[:rows, :cols]
        err, bad = mismatches(a, n, atol, rtol)
        absolute[(o, i)] = err
        with np.errstate(divide="ignore", invalid="ignore"):
            relative[(o, i)] = err / np.abs(n)
        if bad.any():
            ok = False
            for r, c in zip(*np.nonzero(bad)):
                worst.append((float(err[r, c]), target.output_names[o], target.input_names[i], int(r), int(c),
                              float(a[r, c]), float(n[r, c])))
    if plot_absolute_error:
        jacobian_plot(absolute, function, inputs=inputs, title=f"absolute error of {target.what}")
    if plot_relative_error:
        jacobian_plot(relative, function, inputs=inputs, title=f"relative error of {target.what}")
    if not ok:
        worst.sort(key=lambda w: (not np.isfinite(w[0]), w[0]), reverse=True)
        message = _table(target.what, worst[:show_worst])
        if raise_exception:
            raise GradientCheckError(message)
    return ok


def gradcheck_tape(tape, eps: float = 1e-4, atol: float = 1e-3, rtol: float = 1e-2, raise_exception: bool = True,
                   input_output_masks: dict | None = None, max_inputs_per_var: int = -1,
                   max_outputs_per_var: int = -1) -> bool:
    """`gradcheck` on every launch recorded on `tape` (with the arrays' current values); True when all pass.

    Args:
        tape: a `gk.Tape` that recorded launches.
        eps: the central-difference step.
        atol: the absolute tolerance of the comparison.
        rtol: the relative tolerance, times the finite-difference value.
        raise_exception: raise `gk.GradientCheckError` at the first launch that fails (True) or return False.
        input_output_masks: maps a kernel's name to the `input_output_mask` of its launches.
        max_inputs_per_var: compare at most this many columns per input; -1: all.
        max_outputs_per_var: compare at most this many rows per output; -1: all."""
    ok = True
    masks = input_output_masks or {}
    for rec in tape.launches:
        ok &= gradcheck(rec.kernel_obj, rec.dim, rec.inputs, rec.outputs, eps=eps, atol=atol, rtol=rtol,
                        raise_exception=raise_exception, device=rec.device,
                        input_output_mask=masks.get(rec.kernel_obj.key), max_inputs_per_var=max_inputs_per_var,
                        max_outputs_per_var=max_outputs_per_var)
    return ok
