"""concat2 and concat, of both dialects, as C99 (the contract: core/backends/c/emitter.py)."""

from __future__ import annotations

import math

from core.backends.c.emitter import c_function, c_values, emits
from core.ir.ops.concat.record import ConcatOperands


@emits("concat2")
@emits("concat")
def concat_emit_c(record: ConcatOperands, symbol: str) -> str:
    """`concat_kernel` for one image. In C order the output is `outer` blocks (the product of the dimensions
    before the axis), each the inputs' next blocks in order: copied (an input on the output's grid) or moved to
    the output scale (qt_round_shift64, saturated). HWC along H: 1 block of Hk * W * C per input; W: H blocks of
    Wk * C; C: H * W blocks of Ck."""
    shapes = [record.shape_of_input(k) for k in range(len(record.operands()))]
    axis = record.image_axis
    outer = math.prod(shapes[0][:axis])
    blocks = [math.prod(shape[axis:]) for shape in shapes]
    shifts = [record.rescale(k) for k in range(len(shapes))]
    copies, offset = [], 0
    for k, (block, shift) in enumerate(zip(blocks, shifts)):
        copies.append(f"        memcpy(o + {offset}, in{k} + (long)b * {block}, {block} * sizeof *o);" if shift == 0 else
                      f"        for (i = 0; i < {block}; i++)\n"
                      f"            o[{offset} + i] = qt_sat8(qt_round_shift64(in{k}[(long)b * {block} + i], {shift}));")
        offset += block
    described = " + ".join(f"{list(shape)} (shift {shift})" for shape, shift in zip(shapes, shifts))
    return f"""/* {record.operation} along axis {axis}: {described} ({record.dialect}) */
{c_function(record, symbol, len(shapes), prefix="QT_SIMD static")}    long b, i;
    for (b = 0; b < {outer}; b++) {{
        {c_values(record).type} *o = out + b * {offset};
{chr(10).join(copies)}
    }}
    (void)i;
}}
"""
