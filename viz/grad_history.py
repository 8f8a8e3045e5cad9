"""Gradient statistics over the iterations of a captured run (TensorBoard's scalars and distributions): at the
end of each backward pass, per array label, the norm of the gradient that arrived and five quantiles of its
entries; bounded in size so a long training loop keeps a small bundle."""

from __future__ import annotations

import math

import numpy as np

MAX_ITERATIONS = 2000      # backward passes kept (afterwards every other one is dropped, evenly thinning)
MAX_LABELS = 64            # arrays (by label) tracked per pass
QUANTILES = (0.0, 0.25, 0.5, 0.75, 1.0)


def _label(a, name: str) -> str:
    """As a bundle names the array (viz/bundle.py): its label, the user's variable, else the parameter."""
    origin = getattr(a, "_origin", None)
    return getattr(a, "label", None) or (origin[2] if origin and origin[2] else None) or name


def arrived_norms(tape) -> dict:
    """{id(array): norm} of the gradient that reached each array a launch wrote (NaN when it held a NaN or
    Inf), from the snapshots a snapshotting tape took before the adjoint of its last writer, the first to
    consume it in backward order; empty without snapshots."""
    out: dict[int, float] = {}
    for b in getattr(tape, "backward_records", []):
        rec = tape.records[b.record]
        params = [n for n, _ in rec.kernel_obj.params]
        for j in rec.kernel_obj.facts().written:
            snap = b.grads.before.get(params[j])
            if snap is not None and id(rec.args[j]) not in out:
                out[id(rec.args[j])] = math.nan if snap.stats.get("nonfinite", 0) else snap.stats.get("norm", 0.0)
    return out


def pass_stats(tape, grads: dict) -> dict:
    """{label: {"norm": float, "q": [5 quantiles] or None}} for one finished backward pass of `tape`.
    `grads` holds each array's gradient as backward left it ({id: NumPy}); intermediates, which backward
    clears, are measured from the snapshot taken before the adjoint that consumed them, when there is one."""
    squares: dict[str, float] = {}
    samples: dict[str, list] = {}
    arrived = arrived_norms(tape)
    seen = set()
    for rec in tape.launches:
        params = [n for n, _ in rec.kernel_obj.params]
        for name, a in zip(params, rec.args):
            if not hasattr(a, "buffer") or id(a) in seen or not getattr(a, "requires_grad", False):
                continue
            seen.add(id(a))
            label = _label(a, name)
            if label not in squares and len(squares) >= MAX_LABELS:
                continue
            if id(a) in arrived:
                norm = arrived[id(a)]
            else:
                g = grads.get(id(a))
                if g is None:
                    continue
                flat = np.asarray(g, dtype=np.float64).reshape(-1)
                norm = float(np.sqrt(np.dot(flat, flat))) if np.isfinite(flat).all() else math.nan
                samples.setdefault(label, []).append(flat)
            squares[label] = squares.get(label, 0.0) + norm * norm
    out = {}
    for label, sq in squares.items():
        q = None
        if label in samples:
            flat = np.concatenate(samples[label])
            finite = flat[np.isfinite(flat)]
            q = [float(v) for v in np.quantile(finite, QUANTILES)] if finite.size else None
        out[label] = {"norm": math.sqrt(sq) if math.isfinite(sq) else None, "q": q}
    return out


class History:
    """The per-pass statistics of a run, thinned evenly once over MAX_ITERATIONS passes."""

    def __init__(self) -> None:
        self.iterations: list[int] = []
        self.loss: list = []
        self.stats: list[dict] = []
        self.count = 0
        self.stride = 1

    def add(self, loss: float | None, stats: dict) -> None:
        k = self.count
        self.count += 1
        if k % self.stride:
            return
        self.iterations.append(k)
        self.loss.append(loss if loss is None or math.isfinite(loss) else None)
        self.stats.append(stats)
        if len(self.iterations) > MAX_ITERATIONS:
            self.iterations, self.loss, self.stats = self.iterations[::2], self.loss[::2], self.stats[::2]
            self.stride *= 2

    def as_dict(self) -> dict | None:
        """Bundle data: {"iterations", "loss", "norms": {label: [..]}, "quantiles": {label: [[5]..]}}."""
        if not self.iterations:
            return None
        labels = []
        for st in self.stats:
            labels += [lb for lb in st if lb not in labels]
        norms = {lb: [st.get(lb, {}).get("norm") for st in self.stats] for lb in labels}
        quantiles = {lb: [st.get(lb, {}).get("q") for st in self.stats] for lb in labels
                     if any(st.get(lb, {}).get("q") for st in self.stats)}
        return {"iterations": self.iterations, "loss": self.loss, "norms": norms, "quantiles": quantiles}
