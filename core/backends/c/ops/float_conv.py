"""float_conv and float_dwconv as C99 (the contract: core/backends/c/emitter.py): the float
kernel's order of operations (core/ir/ops/conv/float_conv/kernel.py) for one HWC image, one output
at a time: acc = bias, then acc += x * w for kh, kw, ci, each product and sum a float32
operation (the program is compiled with -ffp-contract=off: no fused multiply-add), then
floor(acc * 2^output_log2scale + 1/2) in double (exact, as the kernel's float64) saturated, and the
activation's clamp. Taps in the zero padding are skipped; the kernel adds 0 there, which changes
no float32 sum but the sign of a zero, and no integer. Written for correctness, not speed: a
layer kept in float is the exception the user chose."""

from __future__ import annotations

from core.backends.c.emitter import emits
from core.ir.ops.conv.float_conv.record import FloatConvLayer


def _hex(value: float) -> str:
    return float(value).hex()


@emits("float_conv")
@emits("float_dwconv")
def float_conv_emit_c(record: FloatConvLayer, symbol: str) -> str:
    w = record.window
    s, ci_count, co_count = symbol, record.input_channel_num, record.output_channel_num
    low, high = record.clamp()
    scale_in, scale_out = _hex(2.0**-record.input_log2scale) + "f", _hex(2.0**record.output_log2scale)
    if record.depthwise:
        reduction = f"acc += ((float)x[co] * {scale_in}) * {s}_weight[(kh * {w.kernel[1]} + kw) * {ci_count} + co];"
    else:
        reduction = (f"for (ci = 0; ci < {ci_count}; ci++)\n"
                     f"                            acc += ((float)x[ci] * {scale_in}) * "
                     f"{s}_weight[((kh * {w.kernel[1]} + kw) * {ci_count} + ci) * {co_count} + co];")
    start = f"{s}_bias[co]" if record.load_bias else "0.0f"
    return f"""/* {record.operation} {w.height}x{w.width}x{ci_count} -> {w.out_height}x{w.out_width}x{co_count}, kernel {w.kernel[0]}x{w.kernel[1]}, stride {w.stride[0]}x{w.stride[1]}, dilation {w.dilation[0]}x{w.dilation[1]}, pad top {w.pad_top} left {w.pad_left}; float32, {record.activation_type} */
static void {s}(const int8_t *restrict in0, int8_t *restrict out)
{{
    int oh, ow, co, kh, kw, q{"" if record.depthwise else ", ci"};
    for (oh = 0; oh < {w.out_height}; oh++)
        for (ow = 0; ow < {w.out_width}; ow++)
            for (co = 0; co < {co_count}; co++) {{
                float acc = {start};
                double scaled;
                for (kh = 0; kh < {w.kernel[0]}; kh++) {{
                    int ih = oh * {w.stride[0]} - {w.pad_top} + kh * {w.dilation[0]};
                    if (ih < 0 || ih >= {w.height})
                        continue;
                    for (kw = 0; kw < {w.kernel[1]}; kw++) {{
                        int iw = ow * {w.stride[1]} - {w.pad_left} + kw * {w.dilation[1]};
                        const int8_t *x;
                        if (iw < 0 || iw >= {w.width})
                            continue;
                        x = in0 + (ih * {w.width} + iw) * {ci_count};
                        {reduction}
                    }}
                }}
                scaled = (double)acc * {scale_out} + 0.5;
                if (scaled >= 127.0)
                    q = 127;
                else if (scaled < -128.0)
                    q = -128;
                else {{
                    q = (int)scaled;
                    if ((double)q > scaled)
                        q -= 1;
                }}
                out[(oh * {w.out_width} + ow) * {co_count} + co] = (int8_t)(q < {low} ? {low} : q > {high} ? {high} : q);
            }}
}}
"""
