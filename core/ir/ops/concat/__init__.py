"""concat2 (seed 000 ConcatV2 of two tensors along H, W or C)."""

from core.frontend.layers import AnnotateRule, QKind
from core.ir.op import IrOp, register_op
from core.ir.ops.concat.emit import concat_fields
from core.ir.ops.concat.kernel import concat_kernel
from core.ir.ops.concat.pattern import PATTERN
from core.ir.ops.concat.record import Concat2Layer

CONCAT2 = register_op(IrOp("concat2", Concat2Layer, AnnotateRule(inputs=(QKind.INPUT, QKind.INPUT), output=QKind.ACTIVATION),
                           (PATTERN,), concat_fields, concat_kernel, input_kinds=("input0", "input1")))
