"""gather (a TF2IR 1.4 extension; the tflite_int8 dialect's GATHER): a text model's Embedding, each int32 token id of the
network input replaced by its row of the table, quantized on the output's grid. The ids are read as they are (an INDEX
annotate rule: never quantized, checked against the vocabulary where they enter). Its output is ranged for every row of the
table (output_of_weight), so a word the calibration data never held is not clipped."""

from core.frontend.layers import AnnotateRule, QKind
from core.ir.op import IrOp, register_op
from core.ir.ops.gather.emit import gather_fields, gather_params
from core.ir.ops.gather.kernel import gather_kernel
from core.ir.ops.gather.pattern import PATTERN
from core.ir.ops.gather.record import GatherLayer
from core.ir.ops.gather.tflite import gather_from_tflite

GATHER = register_op(IrOp("gather", GatherLayer, AnnotateRule(inputs=(QKind.INDEX,), output=QKind.ACTIVATION, output_of_weight=True), (PATTERN,),
                          gather_fields, gather_kernel, gather_params, param_kinds=("table",), builders={"GATHER": gather_from_tflite},
                          activation_widths=(8, 16)))
