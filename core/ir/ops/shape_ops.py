"""reshape (Reshape, Squeeze), concat2 (ConcatV2 of two), resize_bilinear (ResizeBilinear)."""

from __future__ import annotations

import math

import numpy as np

from core.frontend.graph import Graph, GraphError, Node, tensor_node
from core.ir.ops.add import check_signed_shift, round_shift, saturate
from core.ir.ops.registry import AnnotateRule, GraphIndex, IrContext, IrError, IrOp, Layer, QKind, register_op

AXIS_NAMES = {1: "H", 2: "W", 3: "C", -1: "C", -2: "W", -3: "H"}
DIM_AXES = {"H": 1, "W": 2, "C": 3}
# resize_bilinear: fractional bits of the source coordinates, and so of the interpolation weights
RESIZE_FRAC_BITS = 10


def match_reshape(graph: Graph, node: Node, index: GraphIndex) -> Layer:
    output_shape = graph.shape(f"{node.name}:0")
    return Layer(
        name=node.name, op="reshape", inputs=[node.inputs[0]], output=f"{node.name}:0", nodes=[node.name],
        attrs={"input_shape": graph.shape(node.inputs[0]), "output_shape": output_shape},
    )


def match_concat(graph: Graph, node: Node, index: GraphIndex) -> Layer:
    *values, axis_tensor = node.inputs
    if len(values) != 2:
        raise GraphError(f"{node.name}: ConcatV2 of {len(values)} inputs; the IR's concat2 takes exactly two")
    axis = int(index.const(axis_tensor))
    if axis not in AXIS_NAMES:
        raise GraphError(f"{node.name}: concat along axis {axis}; the IR concatenates along H, W or C only")
    return Layer(name=node.name, op="concat2", inputs=values, output=f"{node.name}:0", nodes=[node.name], attrs={"dim": AXIS_NAMES[axis]})


def match_resize(graph: Graph, node: Node, index: GraphIndex) -> Layer:
    return Layer(
        name=node.name, op="resize_bilinear", inputs=[node.inputs[0]], output=f"{node.name}:0", nodes=[node.name],
        attrs={"align_corners": bool(node.attr("align_corners", False)), "half_pixel_centers": bool(node.attr("half_pixel_centers", False))},
    )


def _known(layer: Layer, field_name: str, shape, rank: int | None = None) -> list[int]:
    """The shape without its batch dimension, every dimension known."""
    if shape is None or len(shape) < 1 or any(d < 0 for d in shape[1:]) or (rank is not None and len(shape) != rank):
        raise IrError(f"layer {layer.ir_name}: {field_name}: the IR needs a{' rank-%d' % rank if rank else ''} tensor of known size, got {shape}")
    return [int(d) for d in shape[1:]]


def _size(shape: list[int]) -> dict[str, int]:
    return {"height": shape[0], "width": shape[1]}


# --- reshape -------------------------------------------------------------------------------


def reshape_ir_fields(layer: Layer, ctx: IrContext) -> dict:
    """Seed 000 RESHAPE. reshape_param: the graph's shape constant without its first (batch)
    element, as the original tool wrote it (SSD BoxPredictor_0/Reshape_1: [1, -1, 2] -> [-1, 2]);
    for a Squeeze (no shape constant) the output shape. input_shape / output_shape: without the
    batch dimension. log2scale: the scale the reshape shares with its input."""
    in_full, out_full = ctx.graph.shape(layer.inputs[0]), ctx.graph.shape(layer.output)
    input_shape = _known(layer, "input_shape", in_full)
    output_shape = _known(layer, "output_shape", out_full)
    if out_full[0] != in_full[0] or math.prod(input_shape) != math.prod(output_shape):
        raise IrError(f"layer {layer.ir_name}: output_shape {out_full} from input_shape {in_full}: the IR reshapes "
                      f"each image and keeps the batch dimension")
    node = ctx.graph.node(layer.name)
    shape_source = ctx.graph.node(tensor_node(node.inputs[1])) if node.op == "Reshape" and len(node.inputs) > 1 else None
    if shape_source is not None and shape_source.op == "Const":
        reshape_param = [int(v) for v in np.asarray(ctx.graph.constants[shape_source.name]).reshape(-1)[1:]]
    else:
        reshape_param = list(output_shape)
    return {
        "reshape_param": reshape_param,
        "input_shape": input_shape,
        "output_shape": output_shape,
        "dtype": "int8",
        "log2scale": ctx.log2scale(layer.output),
    }


def reshape_kernel(fields: dict, params: dict, inputs: list) -> np.ndarray:
    """[N, *input_shape] int8 -> [N, *output_shape] int8: each image's data re-read in C (row-major)
    order, i.e. the HWC bytes are unchanged, as TF's Reshape on NHWC. No arithmetic, no rounding."""
    x = np.asarray(inputs[0])
    if list(x.shape[1:]) != list(fields["input_shape"]):
        raise ValueError(f"input of shape {x.shape}; the layer takes [N, *{fields['input_shape']}]")
    return x.astype(np.int8).reshape((x.shape[0], *fields["output_shape"]))


# --- concat2 -------------------------------------------------------------------------------


def concat_ir_fields(layer: Layer, ctx: IrContext) -> dict:
    """Seed 000 ConcatV2 (concat2): two NHWC inputs joined along dim H, W or C."""
    fields: dict = {"dim": layer.attrs["dim"]}
    output_log2scale = ctx.log2scale(layer.output)
    shapes = []
    for number, tensor in enumerate(layer.inputs):
        shape = _known(layer, f"input{number}_size", ctx.graph.shape(tensor), rank=4)
        shapes.append(shape)
        log2scale = ctx.log2scale(tensor)
        check_signed_shift(ctx, layer, f"input{number}_log2scale - output_log2scale", log2scale - output_log2scale)
        fields.update({
            f"input{number}_channel_num": shape[2],
            f"input{number}_size": _size(shape),
            f"input{number}_log2scale": log2scale,
            f"input{number}_dtype": "int8",
        })
    out = _known(layer, "output_size", ctx.graph.shape(layer.output), rank=4)
    axis = DIM_AXES[layer.attrs["dim"]] - 1
    if any(shapes[0][k] != shapes[1][k] for k in range(3) if k != axis) or out[axis] != shapes[0][axis] + shapes[1][axis]:
        raise IrError(f"layer {layer.ir_name}: input sizes {shapes} cannot be concatenated along {layer.attrs['dim']} into {out}")
    fields.update({"output_channel_num": out[2], "output_size": _size(out), "output_log2scale": output_log2scale, "output_dtype": "int8"})
    return fields


def concat_kernel(fields: dict, params: dict, inputs: list) -> np.ndarray:
    """int8 input0, input1 (NHWC) -> int8 NHWC.

    Each input is moved to output_log2scale on its own: shifted right by
    inputK_log2scale - output_log2scale with round-half-up if positive, left if negative;
    saturated to [-128, 127]; then the two are concatenated along dim (H, W or C). Every output
    element comes from one input with one rounding: bit-identical to TF's float ConcatV2
    followed by FakeQuant, equal scales or not."""
    out = int(fields["output_log2scale"])
    parts = []
    for number, x in enumerate(inputs):
        x = np.asarray(x, dtype=np.int64)
        size = fields[f"input{number}_size"]
        if x.ndim != 4 or list(x.shape[1:]) != [size["height"], size["width"], fields[f"input{number}_channel_num"]]:
            raise ValueError(f"input{number} of shape {x.shape} does not match its fields")
        parts.append(saturate(round_shift(x, int(fields[f"input{number}_log2scale"]) - out)))
    return np.concatenate(parts, axis=DIM_AXES[fields["dim"]])


# --- resize_bilinear -----------------------------------------------------------------------


def resize_ir_fields(layer: Layer, ctx: IrContext) -> dict:
    """Seed 000 ResizeBilinear. half_pixel_centers is written only when the graph sets it (true);
    absent means false, the original tool's (and TF1's) convention."""
    align_corners, half_pixel = layer.attrs["align_corners"], layer.attrs["half_pixel_centers"]
    if align_corners and half_pixel:
        raise IrError(f"layer {layer.ir_name}: align_corners and half_pixel_centers are both set (TF refuses this too)")
    in_shape = _known(layer, "input_size", ctx.graph.shape(layer.inputs[0]), rank=4)
    out_shape = _known(layer, "output_size", ctx.graph.shape(layer.output), rank=4)
    input_log2scale, output_log2scale = ctx.log2scale(layer.inputs[0]), ctx.log2scale(layer.output)
    ctx.check_shift(layer, f"the output shift 2*{RESIZE_FRAC_BITS} + input_log2scale - output_log2scale",
                    2 * RESIZE_FRAC_BITS + input_log2scale - output_log2scale)
    fields = {
        "dtype": "int8",
        "align_corners": align_corners,
        "input_log2scale": input_log2scale,
        "output_log2scale": output_log2scale,
        "input_channel_num": in_shape[2],
        "input_size": _size(in_shape),
        "output_size": _size(out_shape),
    }
    if half_pixel:
        fields["half_pixel_centers"] = True
    return fields


def source_coordinates(in_size: int, out_size: int, align_corners: bool, half_pixel_centers: bool):
    """(lower, upper, weight) per output index along one axis: the source coordinate
    src = lower + weight / 2^RESIZE_FRAC_BITS of resize_bilinear_kernel."""
    one = 1 << RESIZE_FRAC_BITS
    i = np.arange(out_size, dtype=np.int64)
    if align_corners and out_size > 1:
        numerator, denominator = i * (in_size - 1), out_size - 1
    elif half_pixel_centers:
        numerator, denominator = (2 * i + 1) * in_size - out_size, 2 * out_size
    else:
        numerator, denominator = i * in_size, out_size
    fixed = (2 * numerator * one + denominator) // (2 * denominator)  # round-half-up of src * 2^F
    fixed = np.clip(fixed, 0, (in_size - 1) * one)
    lower = fixed >> RESIZE_FRAC_BITS
    return lower, np.minimum(lower + 1, in_size - 1), fixed - (lower << RESIZE_FRAC_BITS)


def resize_bilinear_kernel(fields: dict, params: dict, inputs: list) -> np.ndarray:
    """int8 NHWC -> int8 NHWC bilinear resize in fixed point, F = RESIZE_FRAC_BITS = 10.

    1. Source coordinate of output row (column) i, as TensorFlow's ResizeBilinear defines it:
       align_corners (and out > 1): src = i * (in - 1) / (out - 1);
       half_pixel_centers:          src = (i + 1/2) * in / out - 1/2;
       otherwise:                   src = i * in / out.
       Computed exactly (integers) and rounded half up to F fractional bits:
       S = floor(src * 2^F + 1/2), clamped to [0, (in - 1) * 2^F].
    2. lower = S >> F, upper = min(lower + 1, in - 1), weight w = S - lower * 2^F in [0, 2^F).
    3. In int32, no intermediate rounding (|value| <= 2^27):
       top    = x[ly][lx] * (2^F - wx) + x[ly][ux] * wx
       bottom = x[uy][lx] * (2^F - wx) + x[uy][ux] * wx
       value  = top * (2^F - wy) + bottom * wy          (scale 2^(2F + input_log2scale))
    4. out = value shifted right by 2F + input_log2scale - output_log2scale with round-half-up
       (the IR refuses a shift outside the target's range), saturated to [-128, 127].
    The only roundings are step 1's (when src is not a multiple of 2^-F) and step 4's: within
    1 LSB of TF's float ResizeBilinear followed by round-half-up whenever
    output_log2scale <= input_log2scale + 1 (step 1 moves the value by at most
    255 * 2^-F input LSB), and exact when every source coordinate is a multiple of 2^-F: e.g.
    align_corners with (out - 1) / (in - 1) a power of two <= 2^F or (in - 1) / (out - 1) an
    integer; half_pixel_centers or neither with out / in a power of two <= 2^(F-1) or in / out
    an integer."""
    x = np.asarray(inputs[0], dtype=np.int64)
    size, out_size = fields["input_size"], fields["output_size"]
    if x.ndim != 4 or list(x.shape[1:]) != [size["height"], size["width"], fields["input_channel_num"]]:
        raise ValueError(f"input of shape {x.shape}; the layer takes [N, {size['height']}, {size['width']}, {fields['input_channel_num']}]")
    align, half = bool(fields["align_corners"]), bool(fields.get("half_pixel_centers", False))
    ly, uy, wy = source_coordinates(size["height"], out_size["height"], align, half)
    lx, ux, wx = source_coordinates(size["width"], out_size["width"], align, half)
    one = 1 << RESIZE_FRAC_BITS
    wx, wy = wx[None, None, :, None], wy[None, :, None, None]
    top_rows, bottom_rows = x[:, ly], x[:, uy]
    top = top_rows[:, :, lx] * (one - wx) + top_rows[:, :, ux] * wx
    bottom = bottom_rows[:, :, lx] * (one - wx) + bottom_rows[:, :, ux] * wx
    value = top * (one - wy) + bottom * wy
    shift = 2 * RESIZE_FRAC_BITS + int(fields["input_log2scale"]) - int(fields["output_log2scale"])
    return saturate(round_shift(value, shift))


# --- C emitters (core/codegen_c.py; contract in core/ops/registry.py) --------------------------


def reshape_emit_c(fields: dict, symbol: str) -> str:
    """reshape as C: the image's bytes copied unchanged (`reshape_kernel`: C order in, C order out)."""
    count = math.prod(int(d) for d in fields["input_shape"])
    return f"""/* reshape {list(fields['input_shape'])} -> {list(fields['output_shape'])}: a copy */
static void {symbol}(const int8_t *restrict in0, int8_t *restrict out)
{{
    memcpy(out, in0, {count});
}}
"""


def concat_emit_c(fields: dict, symbol: str) -> str:
    """concat2 as C: `concat_kernel` for one image. In HWC order the output is `outer` blocks,
    each input0's next block (moved to the output scale: qt_round_shift64, saturated) followed by
    input1's: dim H: 1 block of H0 * W * C and H1 * W * C; W: H blocks of W0 * C and W1 * C;
    C: H * W blocks of C0 and C1."""
    out = int(fields["output_log2scale"])
    shapes = [(int(fields[f"input{k}_size"]["height"]), int(fields[f"input{k}_size"]["width"]), int(fields[f"input{k}_channel_num"]))
              for k in (0, 1)]
    (h0, w0, c0), (h1, w1, c1) = shapes
    outer, blocks = {"H": (1, [h0 * w0 * c0, h1 * w1 * c1]), "W": (h0, [w0 * c0, w1 * c1]),
                     "C": (h0 * w0, [c0, c1])}[fields["dim"]]
    shifts = [int(fields[f"input{k}_log2scale"]) - out for k in (0, 1)]
    return f"""/* concat2 along {fields['dim']}: {list(shapes[0])} (shift {shifts[0]}) + {list(shapes[1])} (shift {shifts[1]}) */
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


def resize_emit_c(fields: dict, symbol: str) -> str:
    """resize_bilinear as C: `resize_bilinear_kernel` for one image. The source rows/columns and
    weights (source_coordinates, step 1-2) depend on the sizes only: they are baked in as tables;
    step 3 in int32 (|value| <= 2^27), step 4 with qt_round_shift64 and saturation."""
    size, out_size = fields["input_size"], fields["output_size"]
    h, w, c = int(size["height"]), int(size["width"]), int(fields["input_channel_num"])
    oh, ow = int(out_size["height"]), int(out_size["width"])
    align, half = bool(fields["align_corners"]), bool(fields.get("half_pixel_centers", False))
    tables = {"y": source_coordinates(h, oh, align, half), "x": source_coordinates(w, ow, align, half)}
    shift = 2 * RESIZE_FRAC_BITS + int(fields["input_log2scale"]) - int(fields["output_log2scale"])
    one = 1 << RESIZE_FRAC_BITS

    def table(name: str, values) -> str:
        return f"static const int32_t {symbol}_{name}[{len(values)}] = {{{', '.join(str(int(v)) for v in values)}}};"

    declarations = "\n".join(table(f"{part}{axis}", values) for axis, parts in tables.items()
                              for part, values in zip(("lower", "upper", "weight"), parts))
    return f"""/* resize_bilinear {h}x{w}x{c} -> {oh}x{ow}, align_corners {int(align)}, half_pixel_centers {int(half)}; >> {shift} */
{declarations}

QT_SIMD static void {symbol}(const int8_t *restrict in0, int8_t *restrict out)
{{
    int oy, ox, c;
    for (oy = 0; oy < {oh}; oy++) {{
        const int8_t *top = in0 + {symbol}_lowery[oy] * {w * c}, *bottom = in0 + {symbol}_uppery[oy] * {w * c};
        int32_t wy = {symbol}_weighty[oy];
        for (ox = 0; ox < {ow}; ox++) {{
            int32_t lx = {symbol}_lowerx[ox] * {c}, ux = {symbol}_upperx[ox] * {c}, wx = {symbol}_weightx[ox];
            int8_t *o = out + (oy * {ow} + ox) * {c};
            for (c = 0; c < {c}; c++) {{
                int32_t t = top[lx + c] * ({one} - wx) + top[ux + c] * wx;
                int32_t b = bottom[lx + c] * ({one} - wx) + bottom[ux + c] * wx;
                o[c] = qt_sat8(qt_round_shift64((int64_t)t * ({one} - wy) + (int64_t)b * wy, {shift}));
            }}
        }}
    }}
}}
"""


register_op(IrOp("reshape", ("Reshape", "Squeeze"), match_reshape, AnnotateRule(inputs=(QKind.IDENTITY,), output=QKind.IDENTITY),
                 ir_fields=reshape_ir_fields, kernel=reshape_kernel, emit_c=reshape_emit_c))
register_op(IrOp("concat2", ("ConcatV2",), match_concat, AnnotateRule(inputs=(QKind.INPUT, QKind.INPUT), output=QKind.ACTIVATION),
                 ir_fields=concat_ir_fields, kernel=concat_kernel, input_kinds=("input0", "input1"),
                 emit_c=concat_emit_c))
register_op(IrOp("resize_bilinear", ("ResizeBilinear",), match_resize, AnnotateRule(inputs=(QKind.INPUT,), output=QKind.ACTIVATION),
                 ir_fields=resize_ir_fields, kernel=resize_bilinear_kernel, emit_c=resize_emit_c))
