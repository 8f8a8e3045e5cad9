"""`gk.autograd.jacobian_plot`: Jacobians from `gk.autograd.jacobian*` as a grid of images, one per
(output, input) pair — rows are outputs, columns inputs — with entries left unevaluated (NaN, from a
`max_*_per_var` limit) drawn dark grey. Colours are symmetric about zero so a sign error stands out."""

from __future__ import annotations

import numpy as np

from ..runtime.tools.jacobian_target import argument_names

MISSING = "#303030"     # NaN entries (not evaluated): dark, unlike any value of the diverging colour maps


def _matplotlib():
    try:
        import matplotlib
        from matplotlib import colors, figure
    except ImportError:
        raise ImportError("gk.autograd.jacobian_plot draws with matplotlib, which is not installed: "
                          "pip install 'gradkit[plot]' (or pip install matplotlib)") from None
    return matplotlib, colors, figure


def _norm(colors, blocks, log_scale: bool):
    finite = [np.abs(b[np.isfinite(b)]) for b in blocks]
    finite = np.concatenate(finite) if finite else np.zeros(0)
    top = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    if log_scale:
        nonzero = finite[finite > 0]
        linthresh = float(nonzero.min()) if nonzero.size else top * 1e-6
        return colors.SymLogNorm(linthresh=linthresh, vmin=-top, vmax=top)
    return colors.Normalize(vmin=-top, vmax=top)


def _namers(function, inputs, ins, outs):
    """(input index -> name, output index -> name): the function's argument names where known."""
    in_names, out_names = [], []
    if function is not None:
        n_in = len(inputs) if inputs is not None else max(ins) + 1
        in_names, out_names = argument_names(function, n_in, max(outs) + 1)

    def in_name(i):
        return in_names[i] if i < len(in_names) else f"input {i}"

    def out_name(o):
        return out_names[o] if o < len(out_names) else f"output {o}"
    return in_name, out_name


def jacobian_plot(jacobians: dict, function=None, inputs=None, show_plot: bool = True, show_colorbar: bool = True,
                  scale_colors_per_submatrix: bool = False, title: str | None = None, colormap: str = "coolwarm",
                  log_scale: bool = False, filename=None):
    """Draw `jacobians` ({(out_idx, in_idx): matrix}) and return the matplotlib Figure.

    `function` (the kernel or Python function differentiated) and `inputs` name the axes; `show_plot`
    calls `pyplot.show()`; `filename` saves the figure (format from its suffix); colours span the largest
    magnitude of all matrices, or of each one with `scale_colors_per_submatrix`; `log_scale` uses a
    symmetric log scale."""
    if not isinstance(jacobians, dict) or not jacobians:
        raise ValueError("jacobian_plot takes the non-empty dict {(out_idx, in_idx): matrix} that "
                         "gk.autograd.jacobian, jacobian_fd or jacobian_fwd return")
    matplotlib, colors, figure = _matplotlib()
    blocks = {}
    for key, value in jacobians.items():
        matrix = np.asarray(value.numpy() if hasattr(value, "numpy") else value, dtype=np.float64)
        if matrix.ndim != 2:
            raise ValueError(f"jacobian_plot: the Jacobian of pair {key} must be a matrix, it has shape {matrix.shape}")
        blocks[key] = matrix
    outs = sorted({o for o, _ in blocks})
    ins = sorted({i for _, i in blocks})
    in_name, out_name = _namers(function, inputs, ins, outs)

    if show_plot:
        from matplotlib import pyplot
        fig = pyplot.figure(figsize=(3.2 * len(ins) + 1.2, 3.0 * len(outs) + 0.8))
    else:
        fig = figure.Figure(figsize=(3.2 * len(ins) + 1.2, 3.0 * len(outs) + 0.8))
    cmap = matplotlib.colormaps[colormap].with_extremes(bad=MISSING)
    shared = None if scale_colors_per_submatrix else _norm(colors, blocks.values(), log_scale)
    grid = fig.subplots(len(outs), len(ins), squeeze=False)
    image = None
    for r, o in enumerate(outs):
        for c, i in enumerate(ins):
            ax = grid[r][c]
            matrix = blocks.get((o, i))
            if matrix is None:
                ax.axis("off")
                continue
            norm = shared or _norm(colors, [matrix], log_scale)
            image = ax.imshow(np.ma.masked_invalid(matrix), cmap=cmap, norm=norm, aspect="auto",
                              interpolation="nearest")
            ax.set_title(f"d {out_name(o)} / d {in_name(i)}", fontsize=9)
            if c == 0:
                ax.set_ylabel(f"{out_name(o)} element")
            if r == len(outs) - 1:
                ax.set_xlabel(f"{in_name(i)} element")
            if show_colorbar and scale_colors_per_submatrix:
                fig.colorbar(image, ax=ax)
    if show_colorbar and not scale_colors_per_submatrix and image is not None:
        fig.colorbar(image, ax=grid.ravel().tolist())
    if title:
        fig.suptitle(title)
    if filename is not None:
        fig.savefig(filename)
    if show_plot:
        from matplotlib import pyplot
        pyplot.show()
    return fig
