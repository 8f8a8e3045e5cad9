"""Structured control flow (`if`, `for`, `while` regions) as LLVM basic blocks with phi nodes; a mixin of
the CPU `Codegen`, which supplies `func`, `values`, `v()`, `region()` and `loop_sums`."""

from __future__ import annotations

from llvmlite import ir

from ...backends.analysis import loop_sum_chains
from ...core.ir import Instr
from .lltypes import I32, llvm_type


class ControlFlow:
    """Emits the region-carrying instructions of the core IR."""

    def if_(self, ins: Instr, b) -> None:
        then_bb = self.func.append_basic_block("then")
        else_bb = self.func.append_basic_block("else")
        merge = self.func.append_basic_block("endif")
        b.cbranch(self.v(ins.args[0]), then_bb, else_bb)
        incoming = []
        for bb, region in ((then_bb, ins.regions[0]), (else_bb, ins.regions[1])):
            b.position_at_end(bb)
            ys = self.region(region, b)
            incoming.append((ys, b.block))
            b.branch(merge)
        b.position_at_end(merge)
        for k, r in enumerate(ins.results):
            phi = b.phi(llvm_type(r.type))
            for ys, blk in incoming:
                phi.add_incoming(ys[k], blk)
            self.values[r.id] = phi

    def for_(self, ins: Instr, b) -> None:
        start, stop, step, *inits = [self.v(a) for a in ins.args]
        body_region = ins.regions[0]
        pre = b.block
        header = self.func.append_basic_block("for")
        body = self.func.append_basic_block("for_body")
        exit_ = self.func.append_basic_block("for_end")
        b.branch(header)
        b.position_at_end(header)
        iv = b.phi(I32, name="iv")
        iv.add_incoming(start, pre)
        phis = self._carried(b, ins, inits, pre)
        sc = ins.args[2].const_value
        if sc is not None:
            cond = b.icmp_signed("<" if sc > 0 else ">", iv, stop)
        else:
            cond = b.select(b.icmp_signed(">", step, ir.Constant(I32, 0)), b.icmp_signed("<", iv, stop),
                            b.icmp_signed(">", iv, stop))
        b.cbranch(cond, body, exit_)
        b.position_at_end(body)
        self.values[body_region.params[0].id] = iv
        for p, phi in zip(body_region.params[1:], phis):
            self.values[p.id] = phi
        self.loop_sums |= loop_sum_chains(body_region, body_region.params[1:])
        ys = self.region(body_region, b)
        iv.add_incoming(b.add(iv, step), b.block)
        self._loop_back(b, ins, phis, ys, header, exit_)

    def while_(self, ins: Instr, b) -> None:
        cond_region, body_region = ins.regions
        pre = b.block
        header = self.func.append_basic_block("while")
        body = self.func.append_basic_block("while_body")
        exit_ = self.func.append_basic_block("while_end")
        b.branch(header)
        b.position_at_end(header)
        phis = self._carried(b, ins, [self.v(a) for a in ins.args], pre)
        for p, phi in zip(cond_region.params, phis):
            self.values[p.id] = phi
        (cond,) = self.region(cond_region, b)
        b.cbranch(cond, body, exit_)
        b.position_at_end(body)
        for p, phi in zip(body_region.params, phis):
            self.values[p.id] = phi
        self._loop_back(b, ins, phis, self.region(body_region, b), header, exit_)

    def _carried(self, b, ins: Instr, inits: list, pre) -> list:
        """One phi per loop-carried value in the loop header, entered with its initial value from `pre`."""
        phis = []
        for val, r in zip(inits, ins.results):
            phi = b.phi(llvm_type(r.type))
            phi.add_incoming(val, pre)
            phis.append(phi)
        return phis

    def _loop_back(self, b, ins: Instr, phis: list, ys: list, header, exit_) -> None:
        """Close the loop: the body's yields flow back into the header phis, which are the loop's results."""
        for phi, y in zip(phis, ys):
            phi.add_incoming(y, b.block)
        b.branch(header)
        b.position_at_end(exit_)
        for r, phi in zip(ins.results, phis):
            self.values[r.id] = phi

    # ------------------------------------------------------------------ faults, stack
