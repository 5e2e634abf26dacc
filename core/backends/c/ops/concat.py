"""concat2 as C99 (the contract: core/backends/c/emitter.py)."""

from __future__ import annotations

from core.backends.c.emitter import emits
from core.ir.ops.concat.record import Concat2Layer


@emits("concat2")
def concat_emit_c(record: Concat2Layer, symbol: str) -> str:
    """`concat_kernel` for one image. In HWC order the output is `outer` blocks, each input0's
    next block (moved to the output scale: qt_round_shift64, saturated) followed by input1's:
    dim H: 1 block of H0 * W * C and H1 * W * C; W: H blocks of W0 * C and W1 * C;
    C: H * W blocks of C0 and C1."""
    shapes = [record.shape_of_input(k) for k in (0, 1)]
    (h0, w0, c0), (h1, w1, c1) = shapes
    outer, blocks = {"H": (1, [h0 * w0 * c0, h1 * w1 * c1]), "W": (h0, [w0 * c0, w1 * c1]),
                     "C": (h0 * w0, [c0, c1])}[record.dim]
    shifts = [record.rescale(k) for k in (0, 1)]
    return f"""/* concat2 along {record.dim}: {list(shapes[0])} (shift {shifts[0]}) + {list(shapes[1])} (shift {shifts[1]}) */
QT_SIMD static void {symbol}(const int8_t *restrict in0, const int8_t *restrict in1, int8_t *restrict out)
{{
    int b, i;
    for (b = 0; b < {outer}; b++) {{
        const int8_t *x0 = in0 + b * {blocks[0]}, *x1 = in1 + b * {blocks[1]};
        int8_t *o = out + b * {blocks[0] + blocks[1]};
        for (i = 0; i < {blocks[0]}; i++)
            o[i] = qt_sat8(qt_round_shift64(x0[i], {shifts[0]}));
        for (i = 0; i < {blocks[1]}; i++)
            o[{blocks[0]} + i] = qt_sat8(qt_round_shift64(x1[i], {shifts[1]}));
    }}
}}
"""
