"""The loops around a kernel's body: a worker's range of linear thread ids walked as one loop (1-D grids) or
as rows of the last axis (n-D), and for gathered stencil adjoints the interior of each row in a loop of its
own. A mixin of the CPU `Codegen`, which supplies `func`, `fn`, `dims`, `debug`, `uses_stack`, `sp` and
`region()`; the loops set `tid`, `coords` and `interior` for the body's instructions."""

from __future__ import annotations

import re

from llvmlite import ir

from ...core.ir import Instr
from .lltypes import I1, I32, I64

STREAM_TBAA = "gk.stream"          # the TBAA root of streamed stores (jit.mark_nontemporal looks for it)
STREAM_MIN_BYTES = 32 << 20        # streamed bytes per launch from which stores bypass the cache (an L3)
STREAM_BLOCK = 16                  # threads: 16 elements of 4 or 8 bytes start a 64-byte line


class ThreadLoops:
    def inside(self, ins: Instr) -> bool:
        """True for a gathered adjoint's guard (ad/gather.py) that only tests the last axis, in the loop over
        the threads away from that axis's ends (`interior`): there the replayed thread always exists."""
        guard = ins.attrs.get("guard")
        return self.interior and guard is not None and guard == (self.fn.attrs["tid_ndim"] - 1,)

    def inner_loops(self, b, lo, hi, width, body) -> None:
        """`body(j)` for j in [lo, hi): one loop, or for a gathered adjoint three — the threads within its
        margin of either end of the last axis (`width`), and a middle stretch where the guards fold away (the
        replayed thread exists) and every edge test (edges.py) is a loop invariant, so the replayed threads'
        boundary tests cost nothing per thread there and the loop vectorises without masks. (A forward
        stencil gains nothing measurable from a split of its own and would triple its compile time.)"""
        margin = None if self.debug else self.fn.attrs.get("gather_margin")
        if not margin or (margin[0] == 0 and margin[1] == 0):
            self.counted_loop(b, lo, hi, body)
            return
        j1 = _clamp(b, ir.Constant(I64, margin[0]), lo, hi)
        j2 = _clamp(b, b.sub(width, ir.Constant(I64, margin[1])), j1, hi)
        folds = {}
        if self.edges:
            j1, j2, folds = self.edge_stretch(b, j1, j2, width)
        self.counted_loop(b, lo, j1, body)
        self.interior, self.folds = True, folds
        self.counted_loop(b, j1, j2, body)
        self.interior, self.folds = False, {}
        self.counted_loop(b, j2, hi, body)

    def edge_stretch(self, b, j1, j2, width):
        """(start, end, folds): the part of [j1, j2) around its middle that holds no edge test's point
        `bound - offset` (each test has one outcome there: `folds`, id of the comparison -> that outcome,
        computed ahead of the loop at its first thread). Empty for rows of 2^30 threads or more, where j + c
        could wrap in int32."""
        tests, bounds = self.edges
        for ins in bounds:                   # fixed over the row: defined ahead of it
            self.instr(ins, b)
        mid = b.ashr(b.add(j1, j2), ir.Constant(I64, 1))
        points = {}
        for t in tests:
            points.setdefault((t.bound.id, t.offset),
                              b.sub(b.sext(self.v(t.bound), I64), ir.Constant(I64, t.offset)))
        one = ir.Constant(I64, 1)
        for p in points.values():
            before = b.icmp_signed("<", p, mid)
            j1 = b.select(before, _max(b, j1, b.add(p, one)), j1)
            j2 = b.select(before, j2, _min(b, j2, p))
        j2 = _max(b, j1, b.select(b.icmp_signed("<", width, ir.Constant(I64, 1 << 30)), j2, j1))
        folds = {id(t.ins): b.icmp_signed(t.pred, b.add(j1, ir.Constant(I64, t.offset)),
                                          b.sext(self.v(t.bound), I64)) for t in tests}
        return j1, j2, folds

    def counted_loop(self, b, lo, hi, body) -> None:
        """`body(j)` for j in [lo, hi)."""
        head = self.func.append_basic_block("loop")
        inner = self.func.append_basic_block("body")
        done = self.func.append_basic_block("done")
        pre = b.block
        b.branch(head)
        b.position_at_end(head)
        j = b.phi(I64, name="j")
        j.add_incoming(lo, pre)
        b.cbranch(b.icmp_signed("<", j, hi), inner, done)
        b.position_at_end(inner)
        body(j)
        j.add_incoming(b.add(j, ir.Constant(I64, 1), flags=["nsw"]), b.block)
        b.branch(head)
        b.position_at_end(done)

    def thread_body(self, b) -> None:
        """One thread's work (self.tid and coordinates set by the enclosing loop)."""
        if self.uses_stack:
            b.store(ir.Constant(I32, 0), self.sp)
        self.region(self.fn.body, b)

    def flat_loop(self, b, start, end) -> None:
        """1-D grids: one loop over the worker's thread range."""
        def body(tid):
            self.tid, self.coords = tid, None
            self.thread_body(b)
        if self.streamed and not self.fn.attrs.get("gather_margin"):
            self.streaming_loops(b, start, end, body)
        else:
            self.inner_loops(b, start, end, self.dims[0], body)

    def streaming_loops(self, b, start, end, body) -> None:
        """The worker's range for a kernel with streamed outputs (analysis.streamed_outputs: written once per
        thread at [tid], never read). When a launch streams STREAM_MIN_BYTES or more into arrays that start on
        a 64-byte line, the range is walked as a head up to a multiple of STREAM_BLOCK threads, an aligned
        middle and a tail. In the middle the stores to those arrays are at 64-bit thread indices from
        pointers LLVM is told are aligned (assume_aligned), so it can prove its vector stores aligned, and
        carry the tag that jit.mark_nontemporal turns into non-temporal stores (around the cache: a pass
        writes its output once instead of reading and writing it; Dr.Jit does the same); a fence then
        orders them before the worker reports done. Otherwise one plain loop."""
        per_thread, aligned = 0, ir.Constant(I1, 1)
        ids = []
        for p in self.fn.params:
            if p.value.id in self.streamed:
                ptr, _, t = self.arrays[p.value.id]
                ids.append(p.value.id)
                per_thread += t.scalar.np_dtype.itemsize * t.dtype.ncomp
                low = b.and_(b.ptrtoint(ptr, I64), ir.Constant(I64, 63))
                aligned = b.and_(aligned, b.icmp_unsigned("==", low, ir.Constant(I64, 0)))
        big = b.icmp_unsigned(">=", b.mul(self.dims[0], ir.Constant(I64, per_thread)),
                              ir.Constant(I64, STREAM_MIN_BYTES))
        stream = self.func.append_basic_block("stream")
        plain = self.func.append_basic_block("plain")
        done = self.func.append_basic_block("stream_done")
        # The test goes through an empty asm so that LLVM does not fold the assumptions below into it (it
        # would drop them as implied, and not use the dominating test to align the vector stores).
        opaque = ir.InlineAsm(ir.FunctionType(I64, [I64]), "", "=r,0")
        ok = b.call(opaque, [b.zext(b.and_(big, aligned), I64)])
        b.cbranch(b.icmp_unsigned("!=", ok, ir.Constant(I64, 0)), stream, plain)
        b.position_at_end(plain)
        self.counted_loop(b, start, end, body)
        b.branch(done)
        b.position_at_end(stream)
        block = ir.Constant(I64, ~(STREAM_BLOCK - 1))
        first = b.and_(b.add(start, ir.Constant(I64, STREAM_BLOCK - 1)), block)   # multiples of the block:
        last = b.and_(end, block)                                                # known to LLVM as such
        whole = b.icmp_signed("<=", first, last)
        self.counted_loop(b, start, b.select(whole, first, end), body)
        for k in ids:
            assume_aligned(b, self.arrays[k][0])
        self.streaming = True
        self.counted_loop(b, first, last, body)       # empty unless `whole`
        self.streaming = False
        self.counted_loop(b, b.select(whole, last, end), end, body)
        b.fence("seq_cst")
        b.branch(done)
        b.position_at_end(done)

    def row_loops(self, b, start, end) -> None:
        """n-D grids: the worker's flat range [start, end) walked as rows of the last axis, so the inner
        loop has consecutive last coordinates (vectorisable, no division per thread); the leading
        coordinates are computed once per row."""
        ndim = self.fn.attrs["tid_ndim"]
        width = self.dims[ndim - 1]
        one, zero = ir.Constant(I64, 1), ir.Constant(I64, 0)
        rows = self.func.append_basic_block("rows")
        row = self.func.append_basic_block("row")
        next_row = self.func.append_basic_block("next_row")
        done = self.func.append_basic_block("done")
        r0 = b.udiv(start, width)
        j0 = b.sub(start, b.mul(r0, width))
        pre = b.block
        b.branch(rows)
        b.position_at_end(rows)
        flat = b.phi(I64, name="flat")
        r = b.phi(I64, name="r")
        jstart = b.phi(I64, name="jstart")
        flat.add_incoming(start, pre)
        r.add_incoming(r0, pre)
        jstart.add_incoming(j0, pre)
        b.cbranch(b.icmp_signed("<", flat, end), row, done)
        b.position_at_end(row)
        left = b.add(jstart, b.sub(end, flat))
        jend = b.select(b.icmp_signed("<", left, width), left, width)
        lead, q = [], r                       # leading coordinates, innermost first
        for k in range(ndim - 2, -1, -1):
            if k == 0:
                lead.append(q)
            else:
                nq = b.udiv(q, self.dims[k])
                lead.append(b.sub(q, b.mul(nq, self.dims[k])))
                q = nq
        row_base = b.mul(r, width)

        lead = [b.trunc(c, I32) for c in reversed(lead)]

        def thread(j):
            self.tid = b.add(row_base, j)
            self.coords = lead + [b.trunc(j, I32)]
            self.thread_body(b)
        self.coords = lead + [None]           # for edge bounds ahead of the row (edges.py)
        self.inner_loops(b, jstart, jend, width, thread)
        b.branch(next_row)
        b.position_at_end(next_row)
        flat.add_incoming(b.add(flat, b.sub(jend, jstart)), next_row)
        r.add_incoming(b.add(r, one), next_row)
        jstart.add_incoming(zero, next_row)
        b.branch(rows)
        b.position_at_end(done)


def _min(b, x, y):
    return b.select(b.icmp_signed("<", x, y), x, y)


def _max(b, x, y):
    return b.select(b.icmp_signed(">", x, y), x, y)


def _clamp(b, v, lo, hi):
    return _min(b, _max(b, v, lo), hi)


ASSUME = "gk.assume_aligned64"      # placeholder call, made an llvm.assume "align" bundle by assume_bundles
_ASSUME_CALL = re.compile(r'call void @"?' + re.escape(ASSUME) + r'"?\((i8\*|ptr) (%"?[^)"]+"?)\)')


def assume_aligned(b, ptr) -> None:
    """Tell LLVM that `ptr` is 64-byte aligned from here on (where that was tested): the alignment-from-
    assumptions pass, after vectorisation, then gives the vector stores at aligned offsets their alignment.
    llvmlite's builder has no operand bundles, so this emits a placeholder call (see assume_bundles)."""
    i8p = ir.IntType(8).as_pointer()
    fn = b.module.globals.get(ASSUME)
    if fn is None:
        fn = ir.Function(b.module, ir.FunctionType(ir.VoidType(), [i8p]), name=ASSUME)
    b.call(fn, [b.bitcast(ptr, i8p)])


def assume_bundles(text: str) -> str:
    """Module text with the assume_aligned placeholders as `llvm.assume(i1 true) ["align"(p, i64 64)]`."""
    if ASSUME not in text:
        return text
    text = _ASSUME_CALL.sub(lambda m: f'call void @llvm.assume(i1 true) [ "align"({m.group(1)} {m.group(2)}, i64 64) ]',
                            text)
    text = "\n".join(ln for ln in text.split("\n") if not (ln.startswith("declare") and ASSUME in ln))
    if re.search(r'^declare [^\n]*@"?llvm\.assume"?\(', text, re.M):    # a native snippet's, say
        return text
    return text + "\ndeclare void @llvm.assume(i1)\n"
