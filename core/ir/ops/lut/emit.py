"""A matched lut layer as IR fields and its table."""

from __future__ import annotations

from core.frontend.layers import Layer
from core.ir.op import IrContext
from core.ir.records import IrError
from core.quantize.integers import lookup_table


def lut_fields(layer: Layer, ctx: IrContext) -> dict:
    """shape: one image's, any rank (the function is element-wise); the two scales the table
    was made for; function: the region's ops, for the reader."""
    shape = ctx.known_shape(layer, "shape", layer.inputs[0])
    if ctx.known_shape(layer, "shape", layer.output) != shape:
        raise IrError(f"layer {layer.ir_name}: the element-wise region broadcasts {shape} to {ctx.graph.shape(layer.output)}")
    return {"function": layer.attrs.function, "shape": shape, "input_log2scale": ctx.log2scale(layer.inputs[0]),
            "output_log2scale": ctx.log2scale(layer.output), "dtype": "int8"}


def lut_params(layer: Layer, ctx: IrContext) -> dict:
    """{"table": int8[256]}: table[q + 128] = the region's function (TensorFlow's float32 ops) of
    q * 2^-input_log2scale, rounded half up and saturated at 2^-output_log2scale as FakeQuant
    rounds (core/quantize/integers.lookup_table). The annotated graph reads the same table."""
    try:
        table = lookup_table(ctx.graph, layer.nodes, layer.inputs[0], layer.output, ctx.log2scale(layer.inputs[0]),
                             ctx.log2scale(layer.output))
    except ValueError as error:
        raise IrError(f"layer {layer.ir_name}: {error}") from error
    return {"table": table}
