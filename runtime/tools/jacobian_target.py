"""What `gk.autograd` differentiates: one kernel launch (`KernelLaunch`) or a Python function of arrays that
launches kernels and returns array(s) (`FunctionCall`, differentiated through a `gk.Tape` and
`gk.ForwardMode`). Both offer the same four operations on flattened float64 values — evaluate, one adjoint
row, one tangent column, restore — so each Jacobian routine is written once for both."""

from __future__ import annotations

import inspect

import numpy as np


def is_float_array(a) -> bool:
    return hasattr(a, "buffer") and a.dtype.scalar.is_float


def flat(a) -> np.ndarray:
    """A float64 copy of `a`'s elements, components last (`.numpy()` may be a live view)."""
    return np.array(a._read(), dtype=np.float64).reshape(-1)


def like(a, values: np.ndarray):
    """A new array shaped, typed and placed as `a`, holding the flat `values`."""
    from ..arrays.array import array
    host = a.numpy()
    return array(values.reshape(host.shape).astype(host.dtype), dtype=a.dtype, device=a.device)


def assign_flat(a, values: np.ndarray) -> None:
    host = a.numpy()
    a.assign(values.reshape(host.shape).astype(host.dtype))


def make_target(function, dim, inputs, outputs, device):
    """The `KernelLaunch` or `FunctionCall` for `gk.autograd`'s arguments, checked."""
    if getattr(function, "_gk_kernel", False):
        return KernelLaunch(function, dim, inputs, outputs, device)
    if not callable(function):
        raise TypeError(f"gk.autograd takes a kernel or a Python function that launches kernels, got "
                        f"{type(function).__name__}")
    if dim is not None or outputs is not None:
        raise TypeError(f"gk.autograd of the Python function '{_name(function)}': its outputs are the array(s) "
                        f"it returns, so dim= and outputs= are not taken (they are for a kernel)")
    return FunctionCall(function, inputs, device)


def argument_names(function, n_inputs: int, n_outputs: int) -> tuple[list[str], list[str]]:
    """(input names, output names): a kernel's parameter names; a function's positional parameter names
    (`input k` past them) and `output k` for what it returns."""
    if getattr(function, "_gk_kernel", False):
        names = [n for n, _ in function.params]
        return names[:n_inputs], names[n_inputs:n_inputs + n_outputs]
    params = []
    try:
        params = [p.name for p in inspect.signature(function).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):     # builtins and some callables have no signature
        pass
    ins = [params[k] if k < len(params) else f"input {k}" for k in range(n_inputs)]
    return ins, [f"output {k}" for k in range(n_outputs)]


def _name(function) -> str:
    return getattr(function, "__name__", type(function).__name__)


class _Target:
    """Shared bookkeeping: names, differentiable argument indices and (input, output) pair selection."""

    what: str
    inputs: list
    input_names: list[str]
    output_names: list[str]
    diff_inputs: list[int]
    diff_outputs: list[int]
    input_rule = "a float array"

    def pairs(self, mask) -> list[tuple[int, int]]:
        """The (output index, input index) pairs to evaluate: every differentiable pair, or those of
        `input_output_mask`, a list of (input, output) pairs named by index or by name (Warp's order)."""
        if mask is None:
            return [(o, i) for o in self.diff_outputs for i in self.diff_inputs]
        if isinstance(mask, (str, bytes)) or not hasattr(mask, "__iter__"):
            raise TypeError(f"input_output_mask must be a list of (input, output) pairs, got {mask!r}")
        chosen = []
        for entry in mask:
            if not (isinstance(entry, (tuple, list)) and len(entry) == 2):
                raise TypeError(f"input_output_mask: each entry is an (input, output) pair of names or indices, "
                                f"got {entry!r}")
            i = self._resolve("input", entry[0], self.input_names, self.diff_inputs, self.input_rule)
            o = self._resolve("output", entry[1], self.output_names, self.diff_outputs, "a float array")
            if (o, i) not in chosen:
                chosen.append((o, i))
        return chosen

    def _resolve(self, kind, key, names, diff, rule) -> int:
        listed = ", ".join(names) or "none"
        if isinstance(key, str):
            if key not in names:
                raise ValueError(f"input_output_mask: {self.what} has no {kind} named '{key}' ({kind}s: {listed})")
            k = names.index(key)
        elif isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            k = int(key)
            if not 0 <= k < len(names):
                raise ValueError(f"input_output_mask: {kind} index {k} is out of range: {self.what} has "
                                 f"{len(names)} {kind}s ({listed})")
        else:
            raise TypeError(f"input_output_mask: name an {kind} by its name or its index, got {key!r}")
        if k not in diff:
            raise ValueError(f"input_output_mask: {kind} '{names[k]}' of {self.what} is not differentiable "
                             f"(it must be {rule})")
        return k


class KernelLaunch(_Target):
    """One launch of `kernel`; its output arrays are put back as they were before every forward launch
    (so accumulating kernels work) and when the Jacobian routine ends."""

    def __init__(self, kernel, dim, inputs, outputs, device) -> None:
        if dim is None:
            raise TypeError(f"gk.autograd of kernel '{kernel.key}' needs dim= (the launch grid)")
        self.kernel, self.dim, self.device = kernel, dim, device
        self.inputs, self.outputs = list(inputs or []), list(outputs or [])
        self.what = f"kernel '{kernel.key}'"
        self.input_names, self.output_names = argument_names(kernel, len(self.inputs), len(self.outputs))
        self.diff_inputs = [k for k, a in enumerate(self.inputs) if is_float_array(a)]
        self.diff_outputs = [k for k, a in enumerate(self.outputs) if is_float_array(a)]
        self._originals = [a.copy() if hasattr(a, "buffer") else None for a in self.outputs]
        self._duals = None
        self._adjoints = None

    def output_size(self, o: int) -> int:
        return flat(self.outputs[o]).size

    def _put_back_outputs(self) -> None:
        for out, orig in zip(self.outputs, self._originals):
            if orig is not None:
                out.assign(orig.numpy())

    def evaluate(self) -> dict[int, np.ndarray]:
        from ..launch.launch import launch
        self._put_back_outputs()
        launch(self.kernel, self.dim, self.inputs, self.outputs, device=self.device, record_tape=False)
        return {o: flat(self.outputs[o]) for o in self.diff_outputs}

    def adjoint_row(self, o: int, seed: np.ndarray) -> dict[int, np.ndarray]:
        from ..arrays.creation import zeros_like
        from ..launch.launch import launch
        if self._adjoints is None:
            self._adjoints = ([zeros_like(a) if is_float_array(a) else None for a in self.inputs],
                              [zeros_like(a) if is_float_array(a) else None for a in self.outputs])
        adj_in, adj_out = self._adjoints
        for a in [*adj_in, *adj_out]:
            if a is not None:
                a.zero_()
        assign_flat(adj_out[o], seed)
        launch(self.kernel, self.dim, self.inputs, self.outputs, device=self.device, adjoint=True,
               adj_inputs=adj_in, adj_outputs=adj_out, record_tape=False)
        return {i: flat(adj_in[i]) for i in self.diff_inputs}

    def tangent_column(self, i: int, seed: np.ndarray) -> dict[int, np.ndarray]:
        from ..arrays.creation import zeros_like
        from ..launch.launch import launch
        arrays = [a for a in [*self.inputs, *self.outputs] if is_float_array(a)]
        if self._duals is None:
            self._duals = [(a, a.dual) for a in arrays]
            for a in arrays:
                a._set_dual(zeros_like(a, requires_grad=False))
        for a in arrays:
            a.dual.zero_()
        assign_flat(self.inputs[i].dual, seed)
        self._put_back_outputs()
        launch(self.kernel, self.dim, self.inputs, self.outputs, device=self.device, tangent=True,
               record_tape=False)
        return {o: flat(self.outputs[o].dual) for o in self.diff_outputs}

    def set_input(self, i: int, values: np.ndarray) -> None:
        assign_flat(self.inputs[i], values)

    def restore(self) -> None:
        if self._duals is not None:
            for a, dual in self._duals:
                a._set_dual(dual)
            self._duals = None
        self._put_back_outputs()


class FunctionCall(_Target):
    """`function(*inputs)`, which launches kernels and returns an array or a list/tuple of arrays. Its inputs
    to differentiate are the float arrays with `requires_grad` (gradients reach them through a tape); the
    gradients and duals of every array involved are put back as they were when the routine ends."""

    input_rule = "a float array with requires_grad=True"

    def __init__(self, function, inputs, device) -> None:
        self.function, self.device = function, device
        self.inputs = list(inputs or [])
        self.what = f"function '{_name(function)}'"
        self.input_names, _ = argument_names(function, len(self.inputs), 0)
        self.diff_inputs = [k for k, a in enumerate(self.inputs) if is_float_array(a) and a.requires_grad]
        if not self.diff_inputs:
            raise ValueError(f"gk.autograd of {self.what}: none of its inputs is {self.input_rule} (gradients "
                             f"reach only those through the tape)")
        self._outputs = None
        self._tape = None
        self._saved_grads: dict[int, tuple] = {}
        self._saved_duals: dict[int, tuple] = {}

    def _call(self) -> list:
        result = self.function(*self.inputs)
        outs = list(result) if isinstance(result, (list, tuple)) else [result]
        for k, a in enumerate(outs):
            if not hasattr(a, "buffer"):
                raise TypeError(f"gk.autograd: {self.what} must return a gk.array or a list/tuple of them; "
                                f"its output {k} is {type(a).__name__}")
        return outs

    def _untaped_call(self) -> list:
        from ..tape.checkpoint import no_grad
        with no_grad():
            return self._call()

    @property
    def outputs(self) -> list:
        if self._outputs is None:
            self._outputs = self._untaped_call()
        return self._outputs

    @property
    def output_names(self) -> list[str]:
        return [f"output {k}" for k in range(len(self.outputs))]

    @property
    def diff_outputs(self) -> list[int]:
        return [k for k, a in enumerate(self.outputs) if is_float_array(a)]

    def output_size(self, o: int) -> int:
        return flat(self.outputs[o]).size

    def evaluate(self) -> dict[int, np.ndarray]:
        outs = self._untaped_call()
        return {o: flat(outs[o]) for o in self.diff_outputs}

    def _recorded(self):
        """The tape of one call (recorded once, with any enclosing tape set aside meanwhile)."""
        if self._tape is None:
            from ..tape.checkpoint import no_grad
            from ..tape.tape import Tape
            self._save_grads(self.inputs)
            tape = Tape()
            with no_grad(), tape:
                self._outputs = self._call()
            self._save_grads([*tape.gradients, *self._outputs])
            self._tape = tape
        return self._tape

    def _save_grads(self, arrays) -> None:
        for a in arrays:
            if hasattr(a, "buffer") and id(a) not in self._saved_grads:
                grad = a.grad
                self._saved_grads[id(a)] = (a, None if grad is None else grad.numpy().copy())

    def adjoint_row(self, o: int, seed: np.ndarray) -> dict[int, np.ndarray]:
        tape = self._recorded()
        tape.zero()
        for i in self.diff_inputs:
            self.inputs[i].grad.zero_()
        out = self._outputs[o]
        tape.backward(grads={out: like(out, seed)})
        return {i: flat(self.inputs[i].grad) for i in self.diff_inputs}

    def tangent_column(self, i: int, seed: np.ndarray) -> dict[int, np.ndarray]:
        from ..tape.checkpoint import no_grad
        from ..arrays.creation import zeros_like
        from ..tape.forward_mode import ForwardMode
        for a in self.inputs:           # fresh duals, so the user's are neither read nor overwritten
            if is_float_array(a):
                if id(a) not in self._saved_duals:
                    self._saved_duals[id(a)] = (a, a.dual)
                a._set_dual(zeros_like(a, requires_grad=False))
        x = self.inputs[i]
        with no_grad(), ForwardMode(seeds={x: like(x, seed)}):
            outs = self._call()
            # read inside: leaving ForwardMode zeroes the seed's dual, and an output may be the input itself
            return {o: np.zeros(flat(a).size) if a.dual is None else flat(a.dual)
                    for o, a in enumerate(outs) if is_float_array(a)}

    def set_input(self, i: int, values: np.ndarray) -> None:
        assign_flat(self.inputs[i], values)

    def restore(self) -> None:
        for a, dual in self._saved_duals.values():
            a._set_dual(dual)
        for a, grad in self._saved_grads.values():
            if grad is None:
                if a.grad is not None:
                    a.grad.zero_()
            elif a.grad is not None:
                a.grad.assign(grad)
        self._saved_duals, self._saved_grads = {}, {}
