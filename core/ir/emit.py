"""Building the TF2IR IR from a layer graph and its calibration table (seed 000)."""

from __future__ import annotations

from core.frontend.layers import LayerGraph
from core.ir.network import Ir
from core.ir.op import IrContext
from core.ir.ops import OPS


def build_ir(layer_graph: LayerGraph, table, min_shift: int = 0, max_shift: int = 31, input_log2scale: int = 7) -> Ir:
    """Each layer described by its operation (typed record, shifts checked against
    [min_shift, max_shift]) with its int8 constants. `previous_layer` lists a layer's producers
    in the order of the operation's inputs (add: pl, then add; concat2: input0, then input1),
    which is the order the integer kernels take them in."""
    context = IrContext(layer_graph, table, min_shift, max_shift, input_log2scale)
    ir = Ir(layers=[])
    for layer in layer_graph.layers:
        op = OPS[layer.op]
        ir.layers.append(op.describe(layer, context))
        params = op.params(layer, context)
        if params:
            ir.params[layer.ir_name] = params
    return ir
