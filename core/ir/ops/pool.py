"""avg_pool and max_pool: AvgPool / MaxPool, and Mean over H and W (a global
average pool, as Keras writes GlobalAveragePooling2D)."""

from __future__ import annotations

import functools

import numpy as np

from core.frontend.graph import Graph, GraphError, Node
from core.ir.ops.add import INT8_MAX, INT8_MIN, check_signed_shift, round_shift, saturate
from core.ir.ops.registry import AnnotateRule, GraphIndex, IrContext, IrError, IrOp, Layer, QKind, register_op

INT32_LIMIT = 2**31


def match_pool(graph: Graph, node: Node, index: GraphIndex) -> Layer:
    if node.attr("data_format", "NHWC") != "NHWC":
        raise GraphError(f"{node.name}: {node.op} in {node.attr('data_format')} layout; the IR is NHWC only")
    ksize, strides = node.attr("ksize"), node.attr("strides")
    if ksize[0] != 1 or ksize[3] != 1 or strides[0] != 1 or strides[3] != 1:
        raise GraphError(f"{node.name}: {node.op} with ksize {ksize}, strides {strides}; the IR pools over H and W only")
    attrs = {"kernel": [ksize[1], ksize[2]], "strides": [strides[1], strides[2]], "padding": node.attr("padding")}
    if attrs["padding"] == "EXPLICIT":  # MaxPool: [[0, 0], [top, bottom], [left, right], [0, 0]] flattened
        attrs["explicit_padding"] = [int(v) for v in node.attr("explicit_paddings")[2:6]]
    return Layer(
        name=node.name,
        op="avg_pool" if node.op == "AvgPool" else "max_pool",
        inputs=[node.inputs[0]],
        output=f"{node.name}:0",
        nodes=[node.name],
        attrs=attrs,
    )


def is_spatial_mean(graph: Graph, node: Node, index: GraphIndex) -> bool:
    return index.is_const(node.inputs[1]) and sorted(index.const(node.inputs[1]).reshape(-1).tolist()) == [1, 2]


def match_mean(graph: Graph, node: Node, index: GraphIndex) -> Layer:
    shape = graph.shape(node.inputs[0])
    if shape is None or shape[1] < 0 or shape[2] < 0:
        raise GraphError(f"{node.name}: global average over an input of unknown size {shape}")
    if not node.attr("keep_dims", False):
        raise GraphError(f"{node.name}: Mean without keep_dims; the IR's avg_pool keeps H and W (use keepdims=True)")
    return Layer(
        name=node.name,
        op="avg_pool",
        inputs=[node.inputs[0]],
        output=f"{node.name}:0",
        nodes=[node.name],
        attrs={"kernel": [shape[1], shape[2]], "strides": [1, 1], "padding": "VALID"},
    )


# --- IR fields -----------------------------------------------------------------------------


def tf_padding(size: int, kernel: int, stride: int, padding: str) -> tuple[int, int, int]:
    """(output size, before, after) along one axis, as TensorFlow computes them: VALID pads
    nothing; SAME has out = ceil(in / stride), total = max((out - 1) * stride + kernel - in, 0),
    before = total // 2, after = total - before."""
    if padding == "VALID":
        return (size - kernel) // stride + 1, 0, 0
    if padding == "SAME":
        out = -(-size // stride)
        total = max((out - 1) * stride + kernel - size, 0)
        return out, total // 2, total - total // 2
    raise ValueError(f"padding {padding!r}")


def _pool_geometry(layer: Layer, ctx: IrContext) -> dict:
    in_shape, out_shape = ctx.graph.shape(layer.inputs[0]), ctx.graph.shape(layer.output)
    for what, shape in (("input_size", in_shape), ("output_size", out_shape)):
        if shape is None or len(shape) != 4 or min(shape[1:]) < 0:
            raise IrError(f"layer {layer.ir_name}: {what}: the IR needs an NHWC tensor of known size, got {shape}")
    (kh, kw), (sh, sw) = layer.attrs["kernel"], layer.attrs["strides"]
    padding = layer.attrs["padding"]
    if padding == "EXPLICIT":
        top, bottom, left, right = layer.attrs["explicit_padding"]
        out_h, out_w = (in_shape[1] + top + bottom - kh) // sh + 1, (in_shape[2] + left + right - kw) // sw + 1
    else:
        out_h, top, bottom = tf_padding(in_shape[1], kh, sh, padding)
        out_w, left, right = tf_padding(in_shape[2], kw, sw, padding)
    if [out_h, out_w] != [out_shape[1], out_shape[2]]:
        raise IrError(f"layer {layer.ir_name}: output_size {out_shape[1:3]} disagrees with the pooling geometry ({out_h}, {out_w})")
    if max(top, bottom) >= kh or max(left, right) >= kw:
        raise IrError(f"layer {layer.ir_name}: padding {[top, bottom, left, right]} leaves windows with no input element")
    return {
        "input_channel_num": int(in_shape[3]),
        "input_size": {"height": int(in_shape[1]), "width": int(in_shape[2])},
        "kernel_size": {"height": int(kh), "width": int(kw)},
        "stride": {"height": int(sh), "width": int(sw)},
        "padding": {"top": int(top), "bottom": int(bottom), "left": int(left), "right": int(right)},
        "output_channel_num": int(out_shape[3]),
        "output_size": {"height": int(out_h), "width": int(out_w)},
    }


def _pool_fields(layer: Layer, ctx: IrContext) -> dict:
    geometry = _pool_geometry(layer, ctx)
    input_log2scale, output_log2scale = ctx.log2scale(layer.inputs[0]), ctx.log2scale(layer.output)
    return {
        "input_channel_num": geometry["input_channel_num"],
        "input_size": geometry["input_size"],
        "input_log2scale": input_log2scale,
        "input_dtype": "int8",
        "kernel_size": geometry["kernel_size"],
        "stride": geometry["stride"],
        "padding": geometry["padding"],
        "output_channel_num": geometry["output_channel_num"],
        "output_size": geometry["output_size"],
        "output_log2scale": output_log2scale,
        "output_dtype": "int8",
        "dtype": "int8",  # seed 000 lists `dtype` for AVGPOOL/MAXPOOL besides input/output_dtype
    }


def avg_pool_ir_fields(layer: Layer, ctx: IrContext) -> dict:
    """Seed 000 AVGPOOL. input_pre_ls = output_log2scale - input_log2scale: the IR only shifts
    left before averaging, so a negative value (an output scale coarser than the input's, which
    would lose precision before the average) is an IrError, as is a shift the target cannot
    encode or one that could overflow the int32 window sum."""
    fields = _pool_fields(layer, ctx)
    pre_ls = fields["output_log2scale"] - fields["input_log2scale"]
    if pre_ls < 0:
        raise IrError(
            f"layer {layer.ir_name}: input_pre_ls = {pre_ls} (output_log2scale {fields['output_log2scale']} < "
            f"input_log2scale {fields['input_log2scale']}); the IR's avg_pool only shifts its input left before "
            f"averaging; recalibrate so the output scale is at least as fine as the input's"
        )
    ctx.check_shift(layer, "input_pre_ls", pre_ls)
    window = fields["kernel_size"]["height"] * fields["kernel_size"]["width"]
    if 128 * window * 2**pre_ls > INT32_LIMIT:
        raise IrError(f"layer {layer.ir_name}: input_pre_ls = {pre_ls} over a {window}-element window can overflow the int32 sum")
    fields["input_pre_ls"] = pre_ls
    return fields


def max_pool_ir_fields(layer: Layer, ctx: IrContext) -> dict:
    """Like avg_pool's, without input_pre_ls: the max is taken at the input scale, then moved
    to output_log2scale (normally equal)."""
    fields = _pool_fields(layer, ctx)
    check_signed_shift(ctx, layer, "input_log2scale - output_log2scale", fields["input_log2scale"] - fields["output_log2scale"])
    return fields


# --- kernels -------------------------------------------------------------------------------


def _windows(fields: dict, x: np.ndarray, fill: int):
    """Per kernel offset (i, j), the [N, oh, ow, C] view of the element at that offset of every
    window of x padded with `fill`: a loop over the kernel's offsets, vectorized over the rest."""
    out, pad = fields["output_size"], fields["padding"]
    padded = np.pad(x, ((0, 0), (pad["top"], pad["bottom"]), (pad["left"], pad["right"]), (0, 0)), constant_values=fill)
    kh, kw = fields["kernel_size"]["height"], fields["kernel_size"]["width"]
    sh, sw = fields["stride"]["height"], fields["stride"]["width"]
    oh, ow = out["height"], out["width"]
    for i in range(kh):
        for j in range(kw):
            yield padded[:, i : i + sh * (oh - 1) + 1 : sh, j : j + sw * (ow - 1) + 1 : sw, :]


def _check_input(fields: dict, x: np.ndarray) -> None:
    size = fields["input_size"]
    if x.ndim != 4 or list(x.shape[1:]) != [size["height"], size["width"], fields["input_channel_num"]]:
        raise ValueError(f"input of shape {x.shape}; the layer takes [N, {size['height']}, {size['width']}, {fields['input_channel_num']}]")


def avg_pool_kernel(fields: dict, params: dict, inputs: list) -> np.ndarray:
    """int8 NHWC -> int8 NHWC average pool.

    1. Each input element is shifted left by input_pre_ls (>= 0; exact).
    2. sum = the int32 sum of the shifted elements inside the window; padding contributes nothing.
    3. n = the number of window elements inside the input (padding excluded from the count, as
       TF's AvgPool with SAME padding does; with VALID padding n = kernel height * width).
    4. out = floor((2 * sum + n) / (2 * n)): sum / n rounded half up (towards +inf; -2.5 -> -2),
       which is the round-half-up of the exact mean * 2^input_pre_ls at the output scale.
    5. Saturate to [-128, 127].
    Bit-identical to TF's float AvgPool followed by FakeQuant's round-half-up."""
    x = np.asarray(inputs[0], dtype=np.int64)
    _check_input(fields, x)
    x = x << int(fields["input_pre_ls"])
    total = sum(_windows(fields, x, 0))
    count = sum(_windows(fields, np.ones((1,) + x.shape[1:3] + (1,), dtype=np.int64), 0))
    if (count == 0).any():
        raise ValueError("a window holds no input element (padding >= kernel)")
    return saturate((2 * total + count) // (2 * count))


def max_pool_kernel(fields: dict, params: dict, inputs: list) -> np.ndarray:
    """int8 NHWC -> int8 NHWC max pool.

    1. The max over the window's input elements; padding is never chosen (TF pads MaxPool
       with -inf).
    2. Moved to the output scale: shift right by input_log2scale - output_log2scale with
       round-half-up if positive, left if negative (normally 0).
    3. Saturate to [-128, 127]. Bit-identical to TF's float MaxPool followed by FakeQuant."""
    x = np.asarray(inputs[0], dtype=np.int64)
    _check_input(fields, x)
    best = functools.reduce(np.maximum, _windows(fields, x, np.iinfo(np.int64).min))
    return saturate(round_shift(best, int(fields["input_log2scale"]) - int(fields["output_log2scale"])))


# --- C emitters (core/codegen_c.py; contract in core/ops/registry.py) --------------------------


def _c_pool_geometry(fields: dict) -> dict:
    size, out, pad = fields["input_size"], fields["output_size"], fields["padding"]
    return {"H": int(size["height"]), "W": int(size["width"]), "C": int(fields["input_channel_num"]),
            "OH": int(out["height"]), "OW": int(out["width"]),
            "KH": int(fields["kernel_size"]["height"]), "KW": int(fields["kernel_size"]["width"]),
            "SH": int(fields["stride"]["height"]), "SW": int(fields["stride"]["width"]),
            "PT": int(pad["top"]), "PL": int(pad["left"])}


def _c_window(g: dict) -> str:
    """C declaring and computing the window's in-range rows [h0, h1) and columns [w0, w1)."""
    return (f"int h0 = oh * {g['SH']} - {g['PT']}, w0 = ow * {g['SW']} - {g['PL']};\n"
            f"            int h1 = h0 + {g['KH']} < {g['H']} ? h0 + {g['KH']} : {g['H']}, w1 = w0 + {g['KW']} < {g['W']} ? w0 + {g['KW']} : {g['W']};\n"
            f"            int8_t *o = out + (oh * {g['OW']} + ow) * {g['C']};\n"
            f"            int ih, iw, c;\n"
            f"            if (h0 < 0)\n                h0 = 0;\n"
            f"            if (w0 < 0)\n                w0 = 0;")


def avg_pool_emit_c(fields: dict, symbol: str) -> str:
    """avg_pool as C: `avg_pool_kernel` for one image. Per channel the int32 sum of the window's
    in-range elements (|sum| <= 128 * window), then, in int64, out = floor((2 * (sum << input_pre_ls) + n)
    / (2 * n)) with qt_floor_div64 (C's `/` truncates; floor matters for negative sums), n the
    in-range element count; saturate."""
    g = _c_pool_geometry(fields)
    pre_ls = int(fields["input_pre_ls"])
    if not 0 <= pre_ls <= 31:
        raise ValueError(f"avg_pool {symbol}: input_pre_ls {pre_ls} outside [0, 31]")
    return f"""/* avg_pool {g['H']}x{g['W']}x{g['C']} -> {g['OH']}x{g['OW']}, kernel {g['KH']}x{g['KW']}, stride {g['SH']}x{g['SW']}, pad top {g['PT']} left {g['PL']}; << {pre_ls} */
static int32_t {symbol}_sum[{g['C']}]; /* file scope: see the note on stack arrays in core/ops/conv.py */

QT_SIMD static void {symbol}(const int8_t *restrict in0, int8_t *restrict out)
{{
    int32_t *sum = {symbol}_sum;
    int oh, ow;
    for (oh = 0; oh < {g['OH']}; oh++)
        for (ow = 0; ow < {g['OW']}; ow++) {{
            {_c_window(g)}
            int64_t n = (int64_t)(h1 - h0) * (w1 - w0);
            for (c = 0; c < {g['C']}; c++)
                sum[c] = 0;
            for (ih = h0; ih < h1; ih++)
                for (iw = w0; iw < w1; iw++) {{
                    const int8_t *x = in0 + (ih * {g['W']} + iw) * {g['C']};
                    for (c = 0; c < {g['C']}; c++)
                        sum[c] += x[c];
                }}
            for (c = 0; c < {g['C']}; c++)
                o[c] = qt_sat8(qt_floor_div64(2 * qt_shl64(sum[c], {pre_ls}) + n, 2 * n));
        }}
}}
"""


def max_pool_emit_c(fields: dict, symbol: str) -> str:
    """max_pool as C: `max_pool_kernel` for one image: the max of the window's in-range elements
    (padding never wins; the IR has no window without one), moved to the output scale with
    qt_round_shift64 (right: rounded half up; left: exact), saturated."""
    g = _c_pool_geometry(fields)
    shift = int(fields["input_log2scale"]) - int(fields["output_log2scale"])
    return f"""/* max_pool {g['H']}x{g['W']}x{g['C']} -> {g['OH']}x{g['OW']}, kernel {g['KH']}x{g['KW']}, stride {g['SH']}x{g['SW']}, pad top {g['PT']} left {g['PL']}; shift {shift} */
static int8_t {symbol}_best[{g['C']}]; /* file scope: see the note on stack arrays in core/ops/conv.py */

QT_SIMD static void {symbol}(const int8_t *restrict in0, int8_t *restrict out)
{{
    int8_t *best = {symbol}_best;
    int oh, ow;
    for (oh = 0; oh < {g['OH']}; oh++)
        for (ow = 0; ow < {g['OW']}; ow++) {{
            {_c_window(g)}
            for (c = 0; c < {g['C']}; c++)
                best[c] = -128;
            for (ih = h0; ih < h1; ih++)
                for (iw = w0; iw < w1; iw++) {{
                    const int8_t *x = in0 + (ih * {g['W']} + iw) * {g['C']};
                    for (c = 0; c < {g['C']}; c++)
                        best[c] = x[c] > best[c] ? x[c] : best[c];
                }}
            for (c = 0; c < {g['C']}; c++)
                o[c] = qt_sat8(qt_round_shift64(best[c], {shift}));
        }}
}}
"""


# --- accelerator lowering (core/isa.py; assembled by core/accel_codegen.py) -----------------------


def pool_lower_accel(fields: dict, params: dict, inputs: list, output, low, name: str) -> None:
    """avg_pool and max_pool as ALU instructions. A tile (output rows x all columns x channel
    blocks) LOADs its padded input box into ACC (int8 sign-extended; max_pool pads with -128,
    which no window's maximum can be below), then per window tap one ALU op over the tile (MOV
    for the first, ADD or MAX after), then: avg_pool SHL input_pre_ls and RSHR log2(window)
    (a power-of-two window without padding: the mean rounded half up is that shift); max_pool
    the shift from input to output scale; MAX/MIN to int8; STORE."""
    from core.backends.accel.lowering import LoweringError, Window, most_rows, spans
    from core.backends.accel.isa import Alu, Index, Loop

    (x,) = inputs
    window = Window.of(fields)
    average = fields["operation"] == "avg_pool"
    count = window.taps
    if average and (any(fields["padding"].values()) or count & (count - 1)):
        raise LoweringError(f"layer {name}: an avg_pool on the accelerator needs an unpadded power-of-two window "
                            f"(got {window.kernel[0]}x{window.kernel[1]}, padding {fields['padding']})")
    wp, blocks = window.padded_width, x.blocks
    tiles = []
    for block_tile in range(blocks, 0, -1):
        def fits(rows: int, block_tile=block_tile) -> bool:
            return (window.input_rows(rows) * wp + rows * window.out_width) * block_tile <= low.acc_units
        rows = most_rows(window, fits)
        if rows:
            tiles.append((-rows * block_tile, rows, block_tile))
    if not tiles:
        raise LoweringError(f"layer {name}: no tile of one output row and one channel block fits the accumulator buffer")
    _, rows, block_tile = min(tiles)
    pad_value = 0 if average else INT8_MIN
    taps = [(kh, kw) for kh in range(window.kernel[0]) for kw in range(window.kernel[1])]
    for r0, r1 in spans(window.out_height, rows):
        for b0, b1 in spans(blocks, block_tile):
            width, tile_rows = b1 - b0, r1 - r0
            what = f"{name} rows {r0}-{r1 - 1} blocks {b0}-{b1 - 1}"
            result = window.input_rows(tile_rows) * wp * width  # ACC: the input box, then the results
            low.emit(window.load_rows("ACC8", 0, x, (r0, r1), (b0, b1), pad_value, f"{what}: input"))
            shape = (tile_rows, window.out_width, width)
            for tap, (kh, kw) in enumerate(taps):
                op = "MOV" if tap == 0 else ("ADD" if average else "MAX")
                low.emit(Alu(op, Loop(*shape), Index(result, window.out_width * width, width, 1),
                             Index((kh * wp + kw) * width, window.stride[0] * wp * width, window.stride[1] * width, 1),
                             note=f"{what}: tap {kh},{kw}"))
            if average:
                pre_ls = int(fields["input_pre_ls"])
                if pre_ls:
                    low.alu_over("SHL", result, shape, pre_ls, f"{what}: << input_pre_ls {pre_ls}")
                shift = count.bit_length() - 1
            else:
                shift = int(fields["input_log2scale"]) - int(fields["output_log2scale"])
            low.requantize(result, shape, shift, INT8_MIN, INT8_MAX, what)
            low.store(result, (r0, r1), output, (b0, b1), f"{what}: store")


# TVM treats avg_pool as identity-like, but the TF2IR hardware gives its output a
# scale of its own (input_pre_ls), so it is annotated like an activation.
AVG_RULE = AnnotateRule(inputs=(QKind.INPUT,), output=QKind.ACTIVATION)
register_op(IrOp("avg_pool", ("AvgPool",), match_pool, AVG_RULE, ir_fields=avg_pool_ir_fields, kernel=avg_pool_kernel,
                 emit_c=avg_pool_emit_c, lower_accel=pool_lower_accel))
# the global average: its layers are avg_pool layers (kernel = the whole input, stride 1, VALID)
register_op(IrOp("global_mean", ("Mean",), match_mean, AVG_RULE, applies=is_spatial_mean,
                 ir_fields=avg_pool_ir_fields, kernel=avg_pool_kernel, emit_c=avg_pool_emit_c, lower_accel=pool_lower_accel))
register_op(IrOp("max_pool", ("MaxPool",), match_pool, AnnotateRule(inputs=(QKind.INPUT,), output=QKind.INPUT),
                 ir_fields=max_pool_ir_fields, kernel=max_pool_kernel, emit_c=max_pool_emit_c, lower_accel=pool_lower_accel))
