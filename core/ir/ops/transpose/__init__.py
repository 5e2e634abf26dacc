"""transpose (a TF2IR extension; the tflite_int8 dialect's TRANSPOSE): a permutation of one image's axes, the batch axis
kept first, sharing its input's grid (an IDENTITY annotate rule: no arithmetic, no rounding). A multi-head attention's
heads move with it, [T, N, H] <-> [N, T, H] (core/frontend/attention.py)."""

from core.frontend.layers import AnnotateRule, QKind
from core.ir.op import IrOp, register_op
from core.ir.ops.transpose.emit import transpose_fields
from core.ir.ops.transpose.kernel import transpose_kernel
from core.ir.ops.transpose.pattern import PATTERN
from core.ir.ops.transpose.record import TransposeLayer
from core.ir.ops.transpose.tflite import transpose_from_tflite

TRANSPOSE = register_op(IrOp("transpose", TransposeLayer, AnnotateRule(inputs=(QKind.IDENTITY,), output=QKind.IDENTITY), (PATTERN,),
                             transpose_fields, transpose_kernel, builders={"TRANSPOSE": transpose_from_tflite}, activation_widths=(8, 16)))
