"""add: the element-wise sum of two activations (+ Relu6). A bias Add (one
constant operand) belongs to its conv, not here.

Also home of the fixed-point helpers the non-conv kernels share (`round_shift`,
`saturate`, `check_signed_shift`, `producer_ir_name`)."""

from __future__ import annotations

import numpy as np

from core.frontend.graph import Graph, Node
from core.ir.ops.conv import _absorb_activation
from core.ir.ops.registry import AnnotateRule, GraphIndex, IrContext, IrError, IrOp, Layer, QKind, register_op

INT8_MIN, INT8_MAX = -128, 127
IR_ACTIVATIONS = ("Relu6", "None")  # seed 000, 4.2: activation_type


# --- fixed-point helpers shared by the add, pool and shape kernels ---------------------------


def round_shift(values, shift: int) -> np.ndarray:
    """values * 2^-shift as integers (int64): shift > 0 is an arithmetic right shift with
    round-half-up, floor(v / 2^shift + 1/2) = (v + 2^(shift-1)) >> shift (so -2.5 -> -2,
    2.5 -> 3); shift <= 0 is an exact left shift by -shift. No saturation here."""
    values = np.asarray(values, dtype=np.int64)
    shift = int(shift)
    if shift > 0:
        return (values + (1 << (shift - 1))) >> shift
    return values << -shift


def saturate(values) -> np.ndarray:
    """Clamp to [-128, 127] and store as int8 (the result's only saturation)."""
    return np.clip(values, INT8_MIN, INT8_MAX).astype(np.int8)


def check_signed_shift(ctx: IrContext, layer: Layer, field_name: str, value: int) -> int:
    """A shift that may go either way (negative: the other direction): its magnitude must be in
    the target's shift range. Returns the signed value."""
    ctx.check_shift(layer, f"|{field_name}|", abs(int(value)))
    return int(value)




def producer_ir_name(ctx: IrContext, tensor: str) -> str:
    return ctx.producer_name(tensor)


def same_spatial_shape(ctx: IrContext, layer: Layer, tensors: list[str], field_name: str) -> list[int]:
    shapes = [ctx.graph.shape(tensor) for tensor in tensors]
    if any(shape is None or len(shape) != 4 or min(shape[1:]) < 0 for shape in shapes):
        raise IrError(f"layer {layer.ir_name}: {field_name}: the IR needs NHWC inputs of known size, got {shapes}")
    if any(shape[1:] != shapes[0][1:] for shape in shapes):
        raise IrError(f"layer {layer.ir_name}: {field_name}: inputs of different shapes {shapes}; the IR does not broadcast")
    return shapes[0]


# --- add ---------------------------------------------------------------------------------------


def is_activation_sum(graph: Graph, node: Node, index: GraphIndex) -> bool:
    return len(node.inputs) == 2 and not any(index.is_const(tensor) for tensor in node.inputs)


def match_add(graph: Graph, node: Node, index: GraphIndex) -> Layer:
    layer = Layer(name=node.name, op="add", inputs=list(node.inputs), output=f"{node.name}:0", nodes=[node.name])
    _absorb_activation(layer, index)
    return layer


def add_ir_fields(layer: Layer, ctx: IrContext) -> dict:
    """Seed 000, 4.2 ADD. pl = op.inputs[0] (the augend), add = op.inputs[1] (the addend)."""
    if layer.activation not in IR_ACTIVATIONS:
        raise IrError(f"layer {layer.ir_name}: activation_type {layer.activation} is not in the IR (one of {', '.join(IR_ACTIVATIONS)})")
    pl_tensor, add_tensor = layer.inputs
    shape = same_spatial_shape(ctx, layer, [pl_tensor, add_tensor, layer.output], "input_size")
    pl, add, out = ctx.log2scale(pl_tensor), ctx.log2scale(add_tensor), ctx.log2scale(layer.output)
    check_signed_shift(ctx, layer, "pl_log2scale - add_log2scale", pl - add)  # aligning the finer operand
    output_shift_bit = check_signed_shift(ctx, layer, "output_shift_bit", out - min(pl, add))
    height, width, channels = (int(v) for v in shape[1:])
    return {
        "activation_type": layer.activation,
        "input_channel_num": channels,
        "input_size": {"height": height, "width": width},
        "size": channels * height * width,
        "dtype": "int8",
        "pl_log2scale": pl,
        "pl_shiftbit": pl,
        "add_log2scale": add,
        "add_shiftbit": add,
        "output_log2scale": out,
        "output_shift_bit": output_shift_bit,
        "pl_name": producer_ir_name(ctx, pl_tensor),
        "add_name": producer_ir_name(ctx, add_tensor),
    }


def add_kernel(fields: dict, params: dict, inputs: list) -> np.ndarray:
    """int8 pl + int8 add -> int8, element-wise on NHWC batches.

    1. Align: m = min(pl_log2scale, add_log2scale) (the coarser scale). The operand with the finer
       scale (log2scale s > m) is shifted right by s - m with round-half-up,
       (x + 2^(s-m-1)) >> (s-m); the other is used as is.
    2. Sum in int32 (|sum| <= 256).
    3. Shift by output_shift_bit = output_log2scale - m: >= 0 a left shift, < 0 a right shift by
       -output_shift_bit with round-half-up. A left shift saturates, it never wraps: the result is
       the exact sum * 2^output_shift_bit before step 5.
    4. Relu6 (activation_type "Relu6"): clamp to [0, floor(6 * 2^output_log2scale + 1/2)] -- the
       round-half-up of 6 at the output scale, 6 * 2^output_log2scale for output_log2scale >= -1.
       Clamping after rounding equals TF's Relu6 before its FakeQuant (rounding is monotone).
    5. Saturate to [-128, 127].

    Against TF's float add + FakeQuant (round-half-up of (pl * 2^-pl_log2scale + add *
    2^-add_log2scale) * 2^output_log2scale): bit-identical with equal input scales (one rounding,
    step 3) and with output_log2scale = m (one rounding, step 1: the other operand is an integer
    at that scale). Otherwise both steps round: within 1 LSB when output_log2scale < m or
    = m + 1 (over all int8 pairs: 12.5-25% of results differ, by +1 mostly, as both roundings
    go half up), and within 2^(output_log2scale - m - 1) LSB when output_log2scale > m + 1
    (step 1's error is magnified by the left shift)."""
    pl, add = (np.asarray(x, dtype=np.int64) for x in inputs)
    size = fields["input_size"]
    for name, x in (("pl", pl), ("add", add)):
        if x.ndim != 4 or list(x.shape[1:]) != [size["height"], size["width"], fields["input_channel_num"]]:
            raise ValueError(f"{name} of shape {x.shape}; the layer takes [N, {size['height']}, {size['width']}, {fields['input_channel_num']}]")
    if pl.shape != add.shape:
        raise ValueError(f"pl {pl.shape} and add {add.shape}: batches of different sizes")
    pl_scale, add_scale = int(fields["pl_log2scale"]), int(fields["add_log2scale"])
    coarse = min(pl_scale, add_scale)
    total = round_shift(pl, pl_scale - coarse) + round_shift(add, add_scale - coarse)
    result = round_shift(total, -int(fields["output_shift_bit"]))
    if fields["activation_type"] == "Relu6":
        result = np.clip(result, 0, _relu6_limit(int(fields["output_log2scale"])))
    return saturate(result)


def _relu6_limit(log2scale: int) -> int:
    """floor(6 * 2^log2scale + 1/2), exactly."""
    if log2scale >= 0:
        return 6 << log2scale
    return int(round_shift(6, -log2scale))


def add_emit_c(fields: dict, symbol: str) -> str:
    """add as C: `add_kernel` for one image, element by element in int64 (the kernel's
    arithmetic: align the finer operand with qt_round_shift64, sum, shift by output_shift_bit --
    left exactly, right rounded half up --, Relu6 clamp, saturate)."""
    size = fields["input_size"]
    count = int(size["height"]) * int(size["width"]) * int(fields["input_channel_num"])
    pl_scale, add_scale = int(fields["pl_log2scale"]), int(fields["add_log2scale"])
    coarse = min(pl_scale, add_scale)
    clamp = ""
    if fields["activation_type"] == "Relu6":
        clamp = f"\n        r = qt_clamp64(r, 0, {_relu6_limit(int(fields['output_log2scale']))});"
    elif fields["activation_type"] != "None":
        raise ValueError(f"add {symbol}: activation_type {fields['activation_type']!r}; the IR has Relu6 and None")
    return f"""/* add of {count} elements: pl >> {pl_scale - coarse}, add >> {add_scale - coarse} (rounded), sum shifted by {int(fields['output_shift_bit'])}; {fields['activation_type']} */
QT_SIMD static void {symbol}(const int8_t *restrict in0, const int8_t *restrict in1, int8_t *restrict out)
{{
    int i;
    for (i = 0; i < {count}; i++) {{
        int64_t r = qt_round_shift64(qt_round_shift64(in0[i], {pl_scale - coarse}) + qt_round_shift64(in1[i], {add_scale - coarse}), {-int(fields["output_shift_bit"])});{clamp}
        out[i] = qt_sat8(r);
    }}
}}
"""


def add_lower_accel(fields: dict, params: dict, inputs: list, output, low, name: str) -> None:
    """add as accelerator instructions, on chunks of vectors (element-wise: any layout is one
    flat run of H * W * blocks vectors): both operands LOADed into ACC (int8, sign-extended),
    the finer one aligned by RSHR, ALU ADD, the output shift (SHL exact and saturating, or RSHR),
    MAX/MIN for Relu6 and int8, STORE."""
    from core.backends.accel.lowering import LoweringError, spans
    from core.backends.accel.isa import Alu, Index, Load, Loop

    pl, addend = inputs
    if not all(t.strides == output.strides and t.vectors == output.vectors for t in (pl, addend)):
        raise LoweringError(f"layer {name}: operands of different shapes or layouts")
    pl_scale, add_scale = int(fields["pl_log2scale"]), int(fields["add_log2scale"])
    coarse = min(pl_scale, add_scale)
    if fields["activation_type"] == "Relu6":
        clamp_low, clamp_high = 0, min(_relu6_limit(int(fields["output_log2scale"])), INT8_MAX)
    else:
        clamp_low, clamp_high = INT8_MIN, INT8_MAX
    chunk = min(low.acc_units // 2, 0xFFFF)
    if chunk == 0:
        raise LoweringError(f"layer {name}: the accumulator buffer holds fewer than two vectors")
    vectors = output.vectors
    for start, stop in spans(vectors, chunk):
        n = stop - start
        what = f"{name} vectors {start}-{stop - 1}"
        for base, tensor, scale, role in ((0, pl, pl_scale, "pl"), (n, addend, add_scale, "add")):
            low.emit(Load("ACC8", tensor.address + start * low.block, base, (1, n, 1), (0, 1, 0), note=f"{what}: {role}"))
            if scale > coarse:
                low.alu_over("RSHR", base, (1, n, 1), scale - coarse, f"{what}: align {role} >> {scale - coarse}")
        low.emit(Alu("ADD", Loop(n), Index(0, 1), Index(n, 1), note=f"{what}: pl + add"))
        low.requantize(0, (1, n, 1), -int(fields["output_shift_bit"]), clamp_low, clamp_high, what)
        low.emit_store_flat(0, output.address + start * low.block, n, f"{what}: store")


register_op(
    IrOp(
        "add",
        ("Add", "AddV2"),
        match_add,
        AnnotateRule(inputs=(QKind.INPUT, QKind.INPUT), output=QKind.ACTIVATION),
        applies=is_activation_sum,
        ir_fields=add_ir_fields,
        kernel=add_kernel,
        input_kinds=("pl", "add"),
        emit_c=add_emit_c,
        lower_accel=add_lower_accel,
    )
)
