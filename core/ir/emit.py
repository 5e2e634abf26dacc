"""Building the TF2IR IR from a layer graph and its calibration table (seed 000)."""

from __future__ import annotations

from core.frontend.layers import LayerGraph
from core.ir.network import Ir
from core.ir.op import IrContext, in_tf2ir, op_of
from core.ir.ops import OPS  # noqa: F401  (every operation registered)


def build_ir(layer_graph: LayerGraph, table, min_shift: int = 0, max_shift: int = 31) -> Ir:
    """Each layer described by its operation (typed record, shifts checked against
    [min_shift, max_shift]) with its int8 constants, in the traversal order of seed 000, 5.3;
    `previous_layer` lists a layer's producers in the order they were processed (5.5), its
    operands (the kernels' order) are named by its fields (add: pl_name, add_name)."""
    context = IrContext(layer_graph, table, min_shift, max_shift)
    ir = Ir(layers=[])
    for layer in (in_tf2ir(matched, context) for matched in context.order):
        op = op_of(layer, table.float_layers)
        ir.layers.append(op.describe(layer, context))
        params = op.params(layer, context)
        if params:
            ir.params[layer.ir_name] = params
    return ir
