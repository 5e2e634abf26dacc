"""concat2 (seed 000 ConcatV2 of two tensors along H, W or C) and concat (a TF2IR extension:
the same of any number of inputs)."""

from core.frontend.layers import AnnotateRule, QKind
from core.ir.op import AffineOp, IrOp, register_affine_op, register_op
from core.ir.ops.concat.affine_record import ConcatAffineLayer, concat_affine_kernel, concat_from_tflite
from core.ir.ops.concat.emit import concat_fields, concat_n_fields
from core.ir.ops.concat.kernel import concat_kernel
from core.ir.ops.concat.pattern import PATTERN, PATTERN_N
from core.ir.ops.concat.record import Concat2Layer, ConcatLayer

CONCAT2 = register_op(IrOp("concat2", Concat2Layer, AnnotateRule(inputs=(QKind.INPUT, QKind.INPUT), output=QKind.ACTIVATION),
                           (PATTERN,), concat_fields, concat_kernel, input_kinds=("input0", "input1")))
# an N-ary rule: every input is quantized where it is read, however many there are
CONCAT = register_op(IrOp("concat", ConcatLayer, AnnotateRule(inputs=(QKind.INPUT,), output=QKind.ACTIVATION),
                          (PATTERN_N,), concat_n_fields, concat_kernel))
CONCAT_AFFINE = register_affine_op(AffineOp("concat", ConcatAffineLayer, concat_affine_kernel, {"CONCATENATION": concat_from_tflite}))
