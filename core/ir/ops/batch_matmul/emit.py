"""A matched batch_matmul layer as TF2IR fields."""

from __future__ import annotations

from core.frontend.layers import Layer
from core.ir.fixedpoint import FLOAT32_EXACT_INT, INT8_PRODUCT_MAX
from core.ir.op import IrContext
from core.ir.ops.batch_matmul.record import product_shape
from core.ir.records import IrError


def batch_matmul_fields(layer: Layer, ctx: IrContext) -> dict:
    """The operands' and the output's shapes (one image's), the transposes, output_shift = input0_log2scale +
    input1_log2scale - output_log2scale. The annotated graph computes the sums in float32, exact below 2^24: a longer
    sum is refused here, naming the target whose arithmetic takes it."""
    adj_x, adj_y = layer.attrs
    shapes = [ctx.known_shape(layer, f"input{k}_shape", tensor) for k, tensor in enumerate(layer.inputs)]
    product = product_shape(*map(tuple, shapes), adj_x, adj_y)
    if product is None:
        raise IrError(f"layer {layer.ir_name}: operands of shapes {shapes} (adj_x {adj_x}, adj_y {adj_y}) do not multiply")
    if product[1] * INT8_PRODUCT_MAX >= FLOAT32_EXACT_INT:
        raise IrError(f"layer {layer.ir_name}: a product of two activations summing {product[1]} terms; TF2IR's sums of int8 "
                      f"products stay below 2^24 (at most {FLOAT32_EXACT_INT // INT8_PRODUCT_MAX - 1} terms): use target=tflite_int8")
    scales = [ctx.log2scale(tensor) for tensor in layer.inputs]
    output = ctx.log2scale(layer.output)
    return {"input_shapes": shapes, "output_shape": list(product[0]), "adj_x": adj_x, "adj_y": adj_y,
            "input0_log2scale": scales[0], "input1_log2scale": scales[1], "output_log2scale": output,
            "output_shift": scales[0] + scales[1] - output,
            "input0_name": ctx.producer_name(layer.inputs[0]), "input1_name": ctx.producer_name(layer.inputs[1])}
