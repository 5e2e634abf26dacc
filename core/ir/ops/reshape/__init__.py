"""reshape (seed 000 RESHAPE): Reshape and Squeeze, sharing their input's scale (an IDENTITY
annotate rule: no quantize after it)."""

from core.frontend.layers import AnnotateRule, QKind
from core.ir.op import AffineOp, IrOp, register_affine_op, register_op
from core.ir.ops.reshape.affine_record import ReshapeAffineLayer, reshape_affine_kernel, reshape_from_tflite
from core.ir.ops.reshape.emit import reshape_fields
from core.ir.ops.reshape.kernel import reshape_kernel
from core.ir.ops.reshape.pattern import PATTERN
from core.ir.ops.reshape.record import ReshapeLayer

RESHAPE = register_op(IrOp("reshape", ReshapeLayer, AnnotateRule(inputs=(QKind.IDENTITY,), output=QKind.IDENTITY), (PATTERN,),
                           reshape_fields, reshape_kernel))
RESHAPE_AFFINE = register_affine_op(AffineOp("reshape", ReshapeAffineLayer, reshape_affine_kernel, {"RESHAPE": reshape_from_tflite}))
