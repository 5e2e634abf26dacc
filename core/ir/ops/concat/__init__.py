"""concat2 (seed 000 ConcatV2 of two tensors along H, W or C) and concat (a TF2IR extension:
the same of any number of inputs; of both dialects, a .tflite's CONCATENATION read by tflite.py)."""

from core.frontend.layers import AnnotateRule, QKind
from core.ir.op import IrOp, register_op
from core.ir.ops.concat.emit import concat_fields, concat_n_fields
from core.ir.ops.concat.kernel import concat_kernel
from core.ir.ops.concat.pattern import PATTERN, PATTERN_N
from core.ir.ops.concat.record import Concat2Layer, ConcatLayer
from core.ir.ops.concat.tflite import concat_from_tflite

CONCAT2 = register_op(IrOp("concat2", Concat2Layer, AnnotateRule(inputs=(QKind.INPUT, QKind.INPUT), output=QKind.ACTIVATION),
                           (PATTERN,), concat_fields, concat_kernel, input_kinds=("input0", "input1")))
# an N-ary rule: every input is quantized where it is read, however many there are
CONCAT = register_op(IrOp("concat", ConcatLayer, AnnotateRule(inputs=(QKind.INPUT,), output=QKind.ACTIVATION),
                          (PATTERN_N,), concat_n_fields, concat_kernel, builders={"CONCATENATION": concat_from_tflite},
                          activation_widths=(8, 16), constant_operands=True))
