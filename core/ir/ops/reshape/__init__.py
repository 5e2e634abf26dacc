"""reshape (seed 000 RESHAPE), one record of both dialects: TF2IR's from Reshape and Squeeze, sharing their input's
scale (an IDENTITY annotate rule: no quantize after it); the tflite_int8 dialect's from a .tflite's RESHAPE
(tflite.py)."""

from core.frontend.layers import AnnotateRule, QKind
from core.ir.op import IrOp, register_op
from core.ir.ops.reshape.emit import reshape_fields
from core.ir.ops.reshape.kernel import reshape_kernel
from core.ir.ops.reshape.pattern import PATTERN
from core.ir.ops.reshape.record import ReshapeLayer
from core.ir.ops.reshape.tflite import reshape_from_tflite

RESHAPE = register_op(IrOp("reshape", ReshapeLayer, AnnotateRule(inputs=(QKind.IDENTITY,), output=QKind.IDENTITY), (PATTERN,),
                           reshape_fields, reshape_kernel, builders={"RESHAPE": reshape_from_tflite, "EXPAND_DIMS": reshape_from_tflite,
                                                                   "SQUEEZE": reshape_from_tflite}, activation_widths=(8, 16)))
